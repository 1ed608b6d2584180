//! Escaping for DOT quoted strings and Mermaid labels.
//!
//! Every id, description and slice name that reaches an output goes through one of these
//! functions; they write straight into the output buffer (no allocation per label).

use std::fmt::{self, Write};

/// Writes `text` as the inside of a DOT quoted string used as an **ID** (node, cluster
/// or graph name), without the surrounding quotes.
///
/// The mapping is injective: `\` becomes `\\`, `"` becomes `\"`, a line feed `\n`, a
/// carriage return `\r`, and any other control character `\u{XX}` (hex). Since every
/// backslash of the text itself is doubled, the output decodes one way only, and
/// Graphviz keeps backslash pairs in IDs as they are: two different ids never produce
/// the same DOT ID. Non-ASCII text is written as UTF-8 (DOT's default charset).
pub fn dot_id(out: &mut impl Write, text: &str) -> fmt::Result {
    let mut start = 0;
    for (i, c) in text.char_indices() {
        let rep: &str = match c {
            '\\' => "\\\\",
            '"' => "\\\"",
            '\n' => "\\n",
            '\r' => "\\r",
            c if c.is_control() => {
                out.write_str(&text[start..i])?;
                write!(out, "\\u{{{:x}}}", c as u32)?;
                start = i + c.len_utf8();
                continue;
            }
            _ => continue,
        };
        out.write_str(&text[start..i])?;
        out.write_str(rep)?;
        start = i + c.len_utf8();
    }
    out.write_str(&text[start..])
}

/// Writes `text` as the inside of a DOT quoted **label** (an `escString`), without the
/// surrounding quotes.
///
/// Backslashes are doubled so Graphviz's label escapes (`\N`, `\G`, `\l`, ...) never
/// fire on user text; `"` is escaped; `&` becomes `&amp;` (Graphviz decodes entities in
/// labels); a line break (`\n`, `\r\n` or `\r`) becomes the centred line break `\n`; a
/// tab becomes a space; any other control character is shown as `\u{XX}`. `<`, `>`, `{`,
/// `}` and `|` need nothing: pactgraph never uses HTML or record labels.
pub fn dot_label(out: &mut impl Write, text: &str) -> fmt::Result {
    dot_label_br(out, text, "\\n")
}

/// [`dot_label`] with line breaks in `text` written as `br` (`\\l` in left-aligned
/// labels).
pub(crate) fn dot_label_br(out: &mut impl Write, text: &str, br: &str) -> fmt::Result {
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let rep: &str = match c {
            '\\' => "\\\\",
            '"' => "\\\"",
            '&' => "&amp;",
            '\n' => br,
            '\r' => {
                if matches!(chars.peek(), Some((_, '\n'))) {
                    // `\r\n`: the `\n` writes the break.
                    out.write_str(&text[start..i])?;
                    start = i + 1;
                    continue;
                }
                br
            }
            '\t' => " ",
            c if c.is_control() => {
                out.write_str(&text[start..i])?;
                write!(out, "\\\\u{{{:x}}}", c as u32)?;
                start = i + c.len_utf8();
                continue;
            }
            _ => continue,
        };
        out.write_str(&text[start..i])?;
        out.write_str(rep)?;
        start = i + c.len_utf8();
    }
    out.write_str(&text[start..])
}

/// Writes `text` for use inside a double-quoted Mermaid label (`["..."]`), without the
/// quotes.
///
/// Mermaid has no backslash escapes; it decodes entity codes `#name;` and `#NNN;`
/// (decimal). `"`, `#`, `&`, `<`, `>`, `` ` ``, `;`, `%` and `\\` become decimal entity codes,
/// so user text can neither end the label, start markdown, HTML or a comment, nor be read
/// as an entity (brackets, braces, parentheses and `|` are plain text inside quotes); a line break becomes `<br/>`; a tab a
/// space; any other control character its entity code. Non-ASCII text is kept as UTF-8.
pub fn mermaid_label(out: &mut impl Write, text: &str) -> fmt::Result {
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' | '#' | '&' | '<' | '>' | '`' | ';' | '%' | '\\' => {
                out.write_str(&text[start..i])?;
                write!(out, "#{};", c as u32)?;
            }
            '\n' => {
                out.write_str(&text[start..i])?;
                out.write_str("<br/>")?;
            }
            '\r' => {
                out.write_str(&text[start..i])?;
                if !matches!(chars.peek(), Some((_, '\n'))) {
                    out.write_str("<br/>")?;
                }
            }
            '\t' => {
                out.write_str(&text[start..i])?;
                out.write_char(' ')?;
            }
            c if c.is_control() => {
                out.write_str(&text[start..i])?;
                write!(out, "#{};", c as u32)?;
            }
            _ => continue,
        }
        start = i + c.len_utf8();
    }
    out.write_str(&text[start..])
}

/// The first line of `text`, cut to at most `max` characters on a character boundary,
/// and whether anything was left out.
pub(crate) fn shorten(text: &str, max: usize) -> (&str, bool) {
    let line = text.lines().next().unwrap_or("");
    let cut_line = line.len() != text.trim_end().len();
    match line.char_indices().nth(max) {
        Some((i, _)) => (&line[..i], true),
        None => (line, cut_line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> String {
        let mut o = String::new();
        dot_id(&mut o, s).unwrap();
        o
    }
    fn label(s: &str) -> String {
        let mut o = String::new();
        dot_label(&mut o, s).unwrap();
        o
    }
    fn mm(s: &str) -> String {
        let mut o = String::new();
        mermaid_label(&mut o, s).unwrap();
        o
    }

    #[test]
    fn dot_ids_escape_quotes_backslashes_and_line_breaks() {
        assert_eq!(id("plain_id"), "plain_id");
        assert_eq!(id(r#"a"b"#), r#"a\"b"#);
        assert_eq!(id(r"a\"), r"a\\");
        assert_eq!(id("a\nb\rc"), r"a\nb\rc");
        assert_eq!(id("bell\u{7}"), r"bell\u{7}");
        assert_eq!(id("}{<>|"), "}{<>|");
        assert_eq!(id("時尚 👗"), "時尚 👗");
    }

    #[test]
    fn dot_ids_are_injective_on_tricky_pairs() {
        let pairs = [
            ("a\nb", r"a\nb"),
            ("a\"", r#"a\""#),
            ("x\u{1}", r"x\u{1}"),
            ("x\u{1}", r"x\\u{1}"),
            ("\\", "\\\\"),
        ];
        for (a, b) in pairs {
            assert_ne!(id(a), id(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn dot_labels_neutralise_graphviz_escapes() {
        assert_eq!(label(r"\N \G \l"), r"\\N \\G \\l");
        assert_eq!(label("one\ntwo\r\nthree\rfour"), r"one\ntwo\nthree\nfour");
        assert_eq!(label("tab\there"), "tab here");
        assert_eq!(label(r#"say "hi""#), r#"say \"hi\""#);
        assert_eq!(label("ends with \\"), r"ends with \\");
        assert_eq!(label("nul\u{0}"), r"nul\\u{0}");
        assert_eq!(label("café ☕"), "café ☕");
        assert_eq!(label("&amp; &"), "&amp;amp; &amp;");
        let mut left = String::new();
        dot_label_br(&mut left, "a\nb", "\\l").unwrap();
        assert_eq!(left, r"a\lb");
    }

    #[test]
    fn mermaid_labels_use_entity_codes() {
        assert_eq!(mm("ok_id"), "ok_id");
        assert_eq!(mm(r#"a"b"#), "a#34;b");
        assert_eq!(mm("#quot;"), "#35;quot#59;");
        assert_eq!(mm("<b>&</b>"), "#60;b#62;#38;#60;/b#62;");
        assert_eq!(mm("a\nb\r\nc"), "a<br/>b<br/>c");
        assert_eq!(mm("x{y}[z](w)|`%%"), "x{y}[z](w)|#96;#37;#37;");
        assert_eq!(mm("back\\slash\\"), "back#92;slash#92;");
        assert_eq!(mm("esc\u{1b}"), "esc#27;");
        assert_eq!(mm("時尚 👗"), "時尚 👗");
    }

    #[test]
    fn shorten_cuts_on_char_boundaries() {
        assert_eq!(shorten("short", 10), ("short", false));
        assert_eq!(shorten("ééééé", 3), ("ééé", true));
        assert_eq!(shorten("line one\nline two", 40), ("line one", true));
        assert_eq!(shorten("", 4), ("", false));
    }
}
