//! What every probe family is built from, below the families and the hubs
//! that loop over them (`probes`, `recording`, `rules`, `report`): the
//! family names and their registry ([`family`]), what every family gives
//! the hubs ([`unit`]) and computes its totals from ([`window`]), the probe kit ([`probe`]), the window merge
//! laws ([`merge`]), stacks made readable ([`stacks`]), the fact model ([`fact`]) and the report's view model
//! ([`view`]). Nothing here names a family's types, so a family's folder
//! (`family/<name>/`) can use all of it and the hubs can use the families.

pub mod fact;
pub mod family;
pub mod merge;
pub mod probe;
#[cfg(test)]
pub mod random;
pub mod stacks;
pub mod svg;
pub mod unit;
pub mod view;
pub mod window;
