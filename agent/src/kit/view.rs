//! The view model of the report's "Measurements": what each probe family
//! shows, as data (sections of lines, bullets and tables of cells), built
//! once per family (its report section), put in order by `report::view` and
//! only laid out by the renderers (terminal and Markdown; HTML is the
//! Markdown, JSON is the measurements themselves).
//!
//! The terminal report and the Markdown report word some things
//! differently (a terminal line packs what Markdown spreads over a table),
//! so a block says which output it belongs to: [`Block::Line`] and
//! [`Block::Hanging`] are terminal lines, [`Block::Para`], [`Block::Bullets`]
//! and [`Block::MdTable`] Markdown, and [`Block::Table`] is the one table
//! both lay out, each cell carrying its terminal and Markdown text. Numbers
//! are formatted here, once; the renderers decide indentation, wrapping,
//! column padding, styles and Markdown table syntax.

/// One block of the Measurements section (a family, mongod, the host).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Section {
    /// Markdown `###` heading; `None`: the section has none.
    pub md_title: Option<String>,
    pub blocks: Vec<Block>,
}

impl Section {
    pub fn new(md_title: Option<&str>) -> Section {
        Section {
            md_title: md_title.map(str::to_owned),
            blocks: Vec::new(),
        }
    }

    /// Adds a block (chainable).
    pub fn push(&mut self, block: Block) -> &mut Section {
        self.blocks.push(block);
        self
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Terminal: one line.
    Line(Line),
    /// Terminal: `lead label text`, the label in the warning style and the
    /// text wrapped under itself.
    Hanging {
        lead: String,
        label: String,
        text: String,
    },
    /// Markdown: a paragraph.
    Para(String),
    /// Markdown: a bullet list (a blank line after it, even when empty).
    Bullets(Vec<String>),
    /// Both: a table.
    Table(Table),
    /// Markdown only: a table.
    MdTable(Table),
}

/// A terminal line: spans after an indent, wrapped to the width or printed
/// as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub indent: &'static str,
    pub spans: Vec<Span>,
    pub wrap: bool,
}

impl Line {
    /// A plain line at `indent`, wrapped.
    pub fn wrapped(indent: &'static str, text: impl Into<String>) -> Block {
        Block::Line(Line {
            indent,
            spans: vec![Span::Plain(text.into())],
            wrap: true,
        })
    }

    /// A plain line at `indent`, as it is.
    pub fn plain(indent: &'static str, text: impl Into<String>) -> Block {
        Block::Line(Line {
            indent,
            spans: vec![Span::Plain(text.into())],
            wrap: false,
        })
    }

    /// A family's title line: "  Title  lead" (the title bold). Wrapped, the
    /// two spaces after the title become one, as wrapping does.
    pub fn title(title: &str, lead: Option<String>, wrap: bool) -> Block {
        let mut spans = vec![Span::Bold(title.to_owned())];
        if let Some(lead) = lead {
            spans.push(Span::Plain(format!("  {lead}")));
        }
        Block::Line(Line {
            indent: "  ",
            spans,
            wrap,
        })
    }
}

/// Terminal text with a style.
#[derive(Debug, Clone, PartialEq)]
pub enum Span {
    Plain(String),
    Bold(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A column: its headers, and how the terminal pads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub term: String,
    pub md: String,
    /// Terminal: text before the column ("" for the first).
    pub gap: &'static str,
    /// Terminal: padded width (0: as it is) and alignment.
    pub width: usize,
    pub align: Align,
    /// Terminal: cut to the width, with "…".
    pub clip: bool,
    /// Markdown: right-aligned (`---:`).
    pub md_right: bool,
}

impl Column {
    /// A left-aligned text column, cut to `width` in the terminal.
    pub fn text(term: &str, md: &str, gap: &'static str, width: usize) -> Column {
        Column {
            term: term.to_owned(),
            md: md.to_owned(),
            gap,
            width,
            align: Align::Left,
            clip: true,
            md_right: false,
        }
    }

    /// A right-aligned number column.
    pub fn num(term: &str, md: &str, gap: &'static str, width: usize) -> Column {
        Column {
            term: term.to_owned(),
            md: md.to_owned(),
            gap,
            width,
            align: Align::Right,
            clip: false,
            md_right: true,
        }
    }
}

/// A table cell: its terminal text and its Markdown text (escaped).
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub term: String,
    pub md: String,
}

impl Cell {
    /// The same text in both.
    pub fn new(text: impl Into<String>) -> Cell {
        let text = text.into();
        Cell {
            md: text.clone(),
            term: text,
        }
    }

    pub fn two(term: impl Into<String>, md: impl Into<String>) -> Cell {
        Cell {
            term: term.into(),
            md: md.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub cells: Vec<Cell>,
    /// Terminal: the whole row bold.
    pub bold: bool,
}

impl From<Vec<Cell>> for Row {
    fn from(cells: Vec<Cell>) -> Row {
        Row { cells, bold: false }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Terminal: text before every row.
    pub indent: &'static str,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    /// Terminal: the header dimmed.
    pub dim_header: bool,
    /// Terminal: the header shown even without rows.
    pub header_when_empty: bool,
}

impl Table {
    /// A table with a dimmed header, shown only with rows.
    pub fn new(indent: &'static str, columns: Vec<Column>) -> Table {
        Table {
            indent,
            columns,
            rows: Vec::new(),
            dim_header: true,
            header_when_empty: false,
        }
    }
}

/// Escapes text for a Markdown table cell or bullet (pipes and line breaks).
pub fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Markdown inline code that survives backticks inside `text`.
pub fn md_code(text: &str) -> String {
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// First letter in upper case.
pub fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A share (0..1) as a percentage with one decimal: 0.857 → "85.7%".
pub fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// `name` cut to `max` characters, with "…" when cut.
pub fn truncate(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        name.to_string()
    } else {
        let mut s: String = name.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// snake_case serde name of a unit enum value.
pub fn snake<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "unknown".into(),
    }
}

/// The file name of an object path ("/usr/lib/libc.so.6" → "libc.so.6").
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_escaped_and_words_capitalised() {
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
        assert_eq!(md_code("x`y"), "`` x`y ``");
        assert_eq!(capitalise("rseq: 4"), "Rseq: 4");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(percent(0.857), "85.7%");
    }
}
