//! The continuous agent (`mdiag agent`, being built): what stays true across
//! windows. Today: the life cycle of a finding ([`lifecycle`]), pure logic
//! that the agent's window loop will drive.

pub mod lifecycle;
