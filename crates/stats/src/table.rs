//! One table model for every output: a table is built once from an analysis, then rendered to
//! the terminal ([`Table::text`]), to HTML ([`Table::html`], every string escaped), to CSV
//! ([`Table::csv`]) or to JSON ([`Table::json`], one object per row keyed by column keys). So
//! the terminal, the report and the files cannot disagree about a number or its rounding.

use std::fmt::Write as _;

/// A column: its stable key (CSV/JSON), its label for people, its unit, and whether the terminal
/// shows it (`brief`; the report and files show every column).
#[derive(Debug, Clone)]
pub struct Column {
    pub key: &'static str,
    pub label: &'static str,
    pub brief: bool,
}

impl Column {
    pub const fn new(key: &'static str, label: &'static str) -> Column {
        Column { key, label, brief: true }
    }

    /// A column only the report and the files show.
    pub const fn full(key: &'static str, label: &'static str) -> Column {
        Column { key, label, brief: false }
    }
}

/// One cell. Numbers keep their value (JSON, CSV) and their display precision (text, HTML).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Int(u64),
    /// A value and the decimals it is shown with.
    Num(f64, usize),
    Text(String),
    /// Not applicable or not measured: "-" for people, empty in CSV, null in JSON.
    None,
}

impl Cell {
    /// `Num` or `None`.
    pub fn opt(v: Option<f64>, decimals: usize) -> Cell {
        v.filter(|x| x.is_finite()).map_or(Cell::None, |x| Cell::Num(x, decimals))
    }

    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }

    fn show(&self) -> String {
        match self {
            Cell::Int(v) => v.to_string(),
            Cell::Num(v, d) => format!("{v:.d$}"),
            Cell::Text(s) => s.clone(),
            Cell::None => "-".into(),
        }
    }

    fn is_text(&self) -> bool {
        matches!(self, Cell::Text(_))
    }
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Cell>>,
}

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

impl Table {
    pub fn new(columns: Vec<Column>) -> Table {
        Table { columns, rows: Vec::new() }
    }

    pub fn push(&mut self, row: Vec<Cell>) {
        debug_assert_eq!(row.len(), self.columns.len(), "a row has one cell per column");
        self.rows.push(row);
    }

    fn shown(&self, brief: bool) -> Vec<usize> {
        (0..self.columns.len()).filter(|&i| !brief || self.columns[i].brief).collect()
    }

    /// Aligned text: text columns left, numbers right; `brief` shows only brief columns.
    pub fn text(&self, brief: bool) -> String {
        let cols = self.shown(brief);
        let cells: Vec<Vec<String>> = self.rows.iter().map(|r| cols.iter().map(|&i| r[i].show()).collect()).collect();
        let width: Vec<usize> = cols
            .iter()
            .enumerate()
            .map(|(k, &i)| cells.iter().map(|r| r[k].chars().count()).chain([self.columns[i].label.chars().count()]).max().unwrap_or(0))
            .collect();
        let left: Vec<bool> = cols.iter().map(|&i| self.rows.first().is_some_and(|r| r[i].is_text())).collect();
        let line = |vals: Vec<String>| {
            let mut s = String::new();
            for (k, v) in vals.iter().enumerate() {
                if k > 0 {
                    s.push_str("  ");
                }
                if left[k] {
                    let _ = write!(s, "{v:<w$}", w = width[k]);
                } else {
                    let _ = write!(s, "{v:>w$}", w = width[k]);
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut s = line(cols.iter().map(|&i| self.columns[i].label.to_string()).collect());
        for r in cells {
            s.push_str(&line(r));
        }
        s
    }

    /// An HTML `<table>` of every column; every string escaped.
    pub fn html(&self) -> String {
        let mut s = String::from("<table><thead><tr>");
        for c in &self.columns {
            let _ = write!(s, "<th title=\"{}\">{}</th>", esc(c.key), esc(c.label));
        }
        s.push_str("</tr></thead><tbody>");
        for r in &self.rows {
            s.push_str("<tr>");
            for c in r {
                let class = if c.is_text() { " class=\"t\"" } else { "" };
                let _ = write!(s, "<td{class}>{}</td>", esc(&c.show()));
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table>");
        s
    }

    /// CSV with the column keys as header; numbers at full precision, empty for `None`.
    pub fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let _ = w.write_record(self.columns.iter().map(|c| c.key));
        for r in &self.rows {
            let _ = w.write_record(r.iter().map(|c| match c {
                Cell::Int(v) => v.to_string(),
                Cell::Num(v, _) => v.to_string(),
                Cell::Text(t) => t.clone(),
                Cell::None => String::new(),
            }));
        }
        String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
    }

    /// One JSON object per row, keyed by column keys.
    pub fn json(&self) -> serde_json::Value {
        let rows = self.rows.iter().map(|r| {
            let obj: serde_json::Map<String, serde_json::Value> = self
                .columns
                .iter()
                .zip(r)
                .map(|(c, v)| {
                    let j = match v {
                        Cell::Int(x) => serde_json::json!(x),
                        Cell::Num(x, _) => serde_json::json!(x),
                        Cell::Text(t) => serde_json::json!(t),
                        Cell::None => serde_json::Value::Null,
                    };
                    (c.key.to_string(), j)
                })
                .collect();
            serde_json::Value::Object(obj)
        });
        serde_json::Value::Array(rows.collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Table {
        let mut t = Table::new(vec![Column::new("name", "name"), Column::new("n", "count"), Column::full("x", "x ms")]);
        t.push(vec![Cell::text("a\"<b>&'c"), Cell::Int(3), Cell::Num(1.23456, 2)]);
        t.push(vec![Cell::text("d"), Cell::Int(10), Cell::None]);
        t
    }

    #[test]
    fn every_rendering_comes_from_the_same_cells() {
        let t = t();
        assert_eq!(t.text(true), "name      count\na\"<b>&'c      3\nd            10\n");
        assert!(t.text(false).contains("1.23") && t.text(false).lines().nth(2).unwrap().ends_with('-'));
        assert_eq!(t.csv(), "name,n,x\n\"a\"\"<b>&'c\",3,1.23456\nd,10,\n");
        assert_eq!(t.json()[1]["x"], serde_json::Value::Null);
        assert_eq!(t.json()[0]["x"], serde_json::json!(1.23456));
    }

    #[test]
    fn html_escapes_every_string() {
        let h = t().html();
        assert!(h.contains("a&quot;&lt;b&gt;&amp;&#39;c"), "{h}");
        assert!(!h.contains("a\"<b>"));
    }
}
