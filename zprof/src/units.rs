//! Number formats shared by every layer: durations, byte sizes and counts as
//! the report, the findings and the lab summaries print them.

/// Human-readable duration with three significant digits.
pub fn format_ns(ns: u64) -> String {
    let value = ns as f64;
    let (scaled, unit) = if value >= 1e9 {
        (value / 1e9, "s")
    } else if value >= 1e6 {
        (value / 1e6, "ms")
    } else if value >= 1e3 {
        (value / 1e3, "us")
    } else {
        (value, "ns")
    };
    if scaled >= 100.0 {
        format!("{scaled:.0}{unit}")
    } else if scaled >= 10.0 {
        format!("{scaled:.1}{unit}")
    } else {
        format!("{scaled:.2}{unit}")
    }
}

/// Bytes as MiB/GiB.
pub fn format_bytes(bytes: f64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= 1024.0 * MIB {
        format!("{:.2} GiB", bytes / 1024.0 / MIB)
    } else if bytes >= MIB {
        format!("{:.1} MiB", bytes / MIB)
    } else {
        format!("{:.1} KiB", bytes / 1024.0)
    }
}

/// Integer with thousands separators.
pub fn format_count(n: f64) -> String {
    let rounded = n.round() as u64;
    let digits = rounded.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 10.0 && n.fract() != 0.0 {
        format!("{n:.1}")
    } else {
        out
    }
}

/// A share in whole percent: the findings' words and their ranking lines
/// give shares this way, so a title and its line agree.
pub fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}
