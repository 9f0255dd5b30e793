//! A flame graph's subtitle on as many lines as it needs. inferno draws the
//! subtitle as one centred line, and zprof's (samples, losses, frames,
//! colours) run to 250 characters and more: at the default 1200 px both ends
//! were cut off. The subtitle is wrapped at its clauses into lines that fit;
//! inferno draws the first, and the others are added below it, with the
//! picture moved down and grown by as much.

/// Characters that fit on one line of the default 1200 px picture: inferno's
/// 12 px Verdana averages 0.59 of its size a character (its own estimate),
/// about 7.1 px, so 1180 px hold about 166; a margin for wide letters.
pub const SUBTITLE_CHARS: usize = 150;

/// Height of each added line, px (inferno's 12 px font, 1.33 spacing).
const LINE_PX: u32 = 16;

/// The subtitle's lines: broken after "; " where it can, else at a space,
/// each at most `width` characters (a single longer word alone on its line).
pub fn wrap(subtitle: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for clause in subtitle.split_inclusive("; ") {
        if !line.is_empty() && line.chars().count() + clause.trim_end().chars().count() > width {
            lines.push(line.trim_end().to_owned());
            line.clear();
        }
        if clause.trim_end().chars().count() <= width {
            line.push_str(clause);
            continue;
        }
        // A clause longer than a line: its words.
        for word in clause.split_inclusive(' ') {
            if !line.is_empty() && line.chars().count() + word.trim_end().chars().count() > width {
                lines.push(line.trim_end().to_owned());
                line.clear();
            }
            line.push_str(word);
        }
    }
    if !line.trim().is_empty() || lines.is_empty() {
        lines.push(line.trim_end().to_owned());
    }
    lines
}

/// Adds `more` lines below inferno's subtitle in `svg` and moves the rest
/// of the picture down by their height. `svg` is returned as it was where
/// it lacks what is moved (an inferno that lays out otherwise).
pub fn add_lines(svg: String, more: &[String]) -> String {
    if more.is_empty() {
        return svg;
    }
    let extra = LINE_PX * more.len() as u32;
    try_add_lines(&svg, more, extra).unwrap_or(svg)
}

fn try_add_lines(svg: &str, more: &[String], extra: u32) -> Option<String> {
    let height: u32 = attribute_after(svg, "<svg version", "height")?
        .parse()
        .ok()?;
    let grown = height + extra;
    let subtitle_y: f64 = attribute_after(svg, "<text id=\"subtitle\"", "y")?
        .parse()
        .ok()?;
    let subtitle_end = svg.find("<text id=\"subtitle\"")?;
    let insert_at = subtitle_end + svg[subtitle_end..].find("</text>")? + "</text>".len();
    let lines: String = more
        .iter()
        .enumerate()
        .map(|(i, line)| {
            format!(
                "<text class=\"subtitle\" x=\"50.0000%\" y=\"{:.2}\" text-anchor=\"middle\">{}</text>",
                subtitle_y + f64::from(LINE_PX) * (i + 1) as f64,
                escape(line)
            )
        })
        .collect();
    let mut out = format!("{}{lines}{}", &svg[..insert_at], &svg[insert_at..]);
    for (from, to) in [
        (
            format!("height=\"{height}\""),
            format!("height=\"{grown}\""),
        ),
        (
            format!("viewBox=\"0 0 1200 {height}\""),
            format!("viewBox=\"0 0 1200 {grown}\""),
        ),
        (
            "<svg id=\"frames\" x=\"10\"".to_owned(),
            format!("<svg id=\"frames\" x=\"10\" y=\"{extra}\""),
        ),
    ] {
        if !out.contains(&from) {
            return None;
        }
        out = out.replace(&from, &to);
    }
    // The bottom line (details of the frame under the mouse, search matches).
    for id in ["details", "matched"] {
        out = shift_y(&out, &format!("<text id=\"{id}\""), extra)?;
    }
    Some(out)
}

/// Where the value of `name="..."` is in the first tag starting with `tag`.
fn attribute_span(svg: &str, tag: &str, name: &str) -> Option<std::ops::Range<usize>> {
    let start = svg.find(tag)?;
    let end = start + svg[start..].find('>')?;
    let key = format!(" {name}=\"");
    let value = start + svg[start..end].find(&key)? + key.len();
    let len = svg[value..end].find('"')?;
    Some(value..value + len)
}

/// The value of `name="..."` in the first tag starting with `tag`.
fn attribute_after<'a>(svg: &'a str, tag: &str, name: &str) -> Option<&'a str> {
    attribute_span(svg, tag, name).map(|span| &svg[span])
}

/// `svg` with the y of the first tag starting with `tag` moved down by `by`.
fn shift_y(svg: &str, tag: &str, by: u32) -> Option<String> {
    let span = attribute_span(svg, tag, "y")?;
    let y: f64 = svg[span.clone()].parse().ok()?;
    let mut out = svg.to_owned();
    out.replace_range(span, &format!("{:.2}", y + f64::from(by)));
    Some(out)
}

/// Text as SVG character data.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_added_lines_move_the_picture_down_by_their_height() {
        let titles = crate::render::flamegraph::Titles {
            title: "t".into(),
            subtitle: "a; ".repeat(120),
            count_name: "us".into(),
        };
        let lines = vec!["stage;compress 10".to_owned()];
        let svg = crate::render::flamegraph::render_svg(&lines, &titles).unwrap();
        let added = wrap(&titles.subtitle, SUBTITLE_CHARS).len() - 1;
        assert_eq!(added, 2);
        let extra = LINE_PX * added as u32;
        let height: u32 = attribute_after(&svg, "<svg version", "height")
            .unwrap()
            .parse()
            .unwrap();
        let frames_y: u32 = attribute_after(&svg, "<svg id=\"frames\"", "y")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(frames_y, extra);
        assert!(
            svg.contains(&format!("viewBox=\"0 0 1200 {height}\"")),
            "{svg}"
        );
        let details: f64 = attribute_after(&svg, "<text id=\"details\"", "y")
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            details > f64::from(height - 20) && details < f64::from(height),
            "{details} of {height}"
        );
        assert_eq!(svg.matches("<text class=\"subtitle\"").count(), added);
    }

    #[test]
    fn a_long_subtitle_breaks_at_its_clauses_and_keeps_every_word() {
        // The CPU view's subtitle of the guest's pgbench run (2.4.4).
        let subtitle = "1078 samples at 99 Hz per CPU; 0.0% of samples lost; 0 cut at 127 frames; 2 frames unsymbolized, 0 placed ([lib:symbol+off]: a function without symbol); orange compression, green checksums, blue I/O";
        let lines = wrap(subtitle, SUBTITLE_CHARS);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines.iter().all(|l| l.chars().count() <= SUBTITLE_CHARS));
        assert!(lines[0].ends_with(';'), "{lines:#?}");
        assert_eq!(lines.join(" "), subtitle);
        assert_eq!(wrap("short", SUBTITLE_CHARS), ["short"]);
        // A clause longer than a line goes by words.
        let long = "word ".repeat(60);
        let lines = wrap(long.trim_end(), 40);
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:#?}");
        assert_eq!(lines.join(" "), long.trim_end());
    }
}
