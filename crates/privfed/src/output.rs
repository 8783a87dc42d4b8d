//! Output helpers: pretty JSON or aligned `key: value` lines.

use serde_json::Value;

/// Prints `report` as pretty JSON (`json = true`) or as human-readable lines.
pub fn print_report(report: &Value, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_else(|_| report.to_string())
        );
    } else {
        print_human(report, 0);
    }
}

fn print_human(v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                match val {
                    Value::Object(_) => {
                        println!("{pad}{k}:");
                        print_human(val, indent + 2);
                    }
                    _ => println!("{pad}{k}: {}", scalar(val)),
                }
            }
        }
        other => println!("{pad}{}", scalar(other)),
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
