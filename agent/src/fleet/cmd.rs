//! `mdiag fleet`: resolve the store, run the queries on a runtime of its
//! own, build the view and render it in the chosen format. The caller
//! (`app.rs`) writes the text and maps [`FleetError`] to an exit code.

use std::time::Duration;

use bson::DateTime;

use super::{
    html,
    query::{self, Filter},
    render,
    source::{self, SourceError},
    view::{self, Context, FleetView},
};
use crate::cli::{FleetArgs, FleetFormat};

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("cannot start the query runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Render(#[from] render::RenderError),
}

impl FleetError {
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Source(e) if e.is_usage())
    }
}

fn bson_time(t: chrono::DateTime<chrono::Utc>) -> DateTime {
    DateTime::from_millis(t.timestamp_millis())
}

/// Reads the store and returns the view (no rendering).
pub fn view(args: &FleetArgs) -> Result<FleetView, FleetError> {
    let store = source::resolve(
        args.uri.as_deref(),
        args.config.as_deref(),
        std::path::Path::new(crate::mongo::conn::DEFAULT_CONFIG),
    )?;
    let filter = Filter {
        since: args.since.map(bson_time),
        rule: args.rule.clone(),
        host: args.host.clone(),
    };
    let now = DateTime::now();
    let silent_after = args.silent_after.max(Duration::from_secs(1));
    let cutoff = DateTime::from_millis(
        now.timestamp_millis()
            .saturating_sub(i64::try_from(silent_after.as_millis()).unwrap_or(i64::MAX)),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(FleetError::Runtime)?;
    let fetched = rt.block_on(async {
        let db = source::connect(&store).await?;
        query::fetch(&db, &filter, cutoff)
            .await
            .map_err(|e| SourceError::Query {
                uri: store.redacted(),
                why: crate::mongo::conn::Redactor::for_uri(&store.uri).scrub(&e.to_string()),
            })
    });
    // The driver's background tasks are not waited for.
    rt.shutdown_background();
    let ctx = Context {
        store: store.redacted(),
        database: store.database.clone(),
        now,
        silent_after_secs: silent_after.as_secs(),
    };
    Ok(view::build(&fetched?, &filter, &ctx))
}

/// The view in the chosen format.
pub fn render(view: &FleetView, format: FleetFormat) -> Result<String, FleetError> {
    Ok(match format {
        FleetFormat::Terminal => render::terminal(view),
        FleetFormat::Json => render::json(view)?,
        FleetFormat::Html => html::render(view),
    })
}
