//! Output helpers: pretty JSON or aligned `key: value` lines.

use serde_json::Value;
use std::io::Write;

/// Prints `report` as pretty JSON (`json = true`) or as human-readable lines.
pub fn print_report(report: &Value, json: bool) -> std::io::Result<()> {
    if json {
        emit(&serde_json::to_string_pretty(report).unwrap_or_else(|_| report.to_string()))
    } else {
        let mut text = String::new();
        human(report, 0, &mut text);
        emit(text.trim_end_matches('\n'))
    }
}

/// Writes `text` and a newline to standard output and flushes. Unlike `println!`, a closed pipe
/// (`privfed … | head -1`) is an error, not a panic: `main` ends quietly with status 0 on it
/// ([`is_broken_pipe`]), as Unix tools do.
pub fn emit(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Whether `err` (anywhere in its chain) is a write to a closed pipe.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn human(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                match val {
                    Value::Object(_) => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        human(val, indent + 2, out);
                    }
                    _ => out.push_str(&format!("{pad}{k}: {}\n", scalar(val))),
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) if a.len() > 12 => format!("[{} values]", a.len()),
        Value::Array(a) => format!("[{}]", a.iter().map(scalar).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}
