//! `cargo xtask layout`: the import graph of each crate's `src/`, read from
//! the source, and what is wrong with it: circles between files, and in a
//! crate with a layer table ([`ZPROF_LAYERS`]) imports from a lower layer to a
//! higher one and files that belong to no layer (issue 31).
//!
//! A module is a file: `foo.rs` and `foo/mod.rs` are module `foo`, `foo/bar.rs`
//! is `foo::bar`, `lib.rs` and `main.rs` are the crate root. A reference is a
//! path that names a module of the same crate: `use crate::a::b`,
//! `use crate::{a, b::{c, d}}`, `crate::a::f(..)` in code, `super::` and
//! `self::` paths (resolved from the module they are written in, inline `mod`
//! blocks included), and `<crate_name>::` paths (a binary's `main.rs` reaching
//! into the library). A path goes to the file of its longest module prefix,
//! else to the crate root when the root holds an item (or an import) of that
//! name; a path that names neither is listed as unresolved, not counted.
//!
//! What is not a reference, and why:
//! - a parent naming its own child by a relative path (`mod foo;`, then
//!   `foo::bar` or `self::foo::bar`): that is the module tree itself, and
//!   counting it would make every child that takes a shared type from its
//!   parent (`super::X`) a circle, and the crate root a member of every
//!   circle. The same reference spelt from the crate root
//!   (`crate::parent::foo::bar`) is counted, so a `mod.rs` that both holds
//!   what its children share and takes from them shows as the circle it is;
//! - `#[cfg(test)]` items (the `mod tests` blocks) and files declared
//!   `#[cfg(test)] mod x;`: they are not part of the program the layers
//!   describe, and a test may build its fixture from a layer above (a
//!   renderer's test recording a session) without the code under test
//!   depending on it. They are tallied in the summary, not dropped silently;
//! - comments, string and char literals, `pub(crate)`, `pub(in crate::x)`,
//!   `$crate::` (the source is tokenised before paths are read).

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    fmt::Write as _,
    path::Path,
};

use anyhow::{Context as _, bail};

/// One layer of a layered crate: its files and the layers it may import.
#[derive(Debug)]
pub struct Layer {
    /// Its name, as `may_import` lists give it.
    pub name: &'static str,
    /// Its files, relative to `src/`: `dir/` is everything below `dir`, else
    /// one file.
    pub files: &'static [&'static str],
    /// The other layers its files may import (its own files always).
    pub may_import: &'static [&'static str],
}

/// zprof's layers, lowest first: the pipeline of issue 31. Collectors and
/// analyses meet only in the recording (neither may import the other);
/// analyses return data, and only renderers format text.
pub const ZPROF_LAYERS: &[Layer] = &[
    Layer {
        name: "units",
        // Number formatters.
        files: &["units.rs"],
        may_import: &[],
    },
    Layer {
        name: "zfs",
        // OpenZFS knowledge: releases, catalogue, names, ELF, symbols, target, offsets.
        files: &["zfs.rs", "zfs/"],
        may_import: &["units"],
    },
    Layer {
        name: "recording",
        files: &["recording.rs", "recording/"],
        may_import: &["units", "zfs"],
    },
    Layer {
        name: "collect",
        // eBPF loading, attaching, collectors.
        files: &["collect.rs", "collect/"],
        may_import: &["units", "zfs", "recording"],
    },
    Layer {
        name: "analyze",
        // Findings, what-ifs, paths, compare arithmetic.
        files: &["analyze.rs", "analyze/"],
        may_import: &["units", "zfs", "recording"],
    },
    Layer {
        name: "render",
        // Report table, findings text, flame graphs, exposition, top's screen.
        files: &["render.rs", "render/"],
        may_import: &["units", "zfs", "recording", "analyze"],
    },
    Layer {
        name: "cli",
        // clap, one file per subcommand, serve.
        files: &["cli.rs", "cli/"],
        may_import: &["units", "zfs", "recording", "collect", "analyze", "render"],
    },
    Layer {
        name: "root",
        files: &["lib.rs", "main.rs"],
        may_import: &[
            "units",
            "zfs",
            "recording",
            "collect",
            "analyze",
            "render",
            "cli",
        ],
    },
];

/// A crate `cargo xtask layout` checks.
struct CrateSpec {
    /// Its directory under the workspace root (also its package name).
    dir: &'static str,
    /// Its layer table, if it has one (else only circles are checked).
    layers: Option<&'static [Layer]>,
}

const CRATES: &[CrateSpec] = &[
    CrateSpec {
        dir: "zprof",
        layers: Some(ZPROF_LAYERS),
    },
    CrateSpec {
        dir: "zprof-lab",
        layers: None,
    },
    CrateSpec {
        dir: "zprof-ebpf",
        layers: None,
    },
    CrateSpec {
        dir: "xtask",
        layers: None,
    },
];

/// `cargo xtask layout`: checks every crate of [`CRATES`], prints a summary
/// per crate then the details; an error if anything is wrong.
pub fn layout(root: &Path) -> anyhow::Result<()> {
    let mut reports = Vec::new();
    for spec in CRATES {
        let src = root.join(spec.dir).join("src");
        let files = read_src(&src).with_context(|| format!("reading {}", src.display()))?;
        reports.push(check_crate(spec.dir, &files, spec.layers));
    }
    for r in &reports {
        println!("{}", r.summary());
    }
    for r in &reports {
        print!("{}", r.details());
    }
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| r.failed())
        .map(|r| r.name.as_str())
        .collect();
    if !failed.is_empty() {
        bail!("layout: {} not as drawn (details above)", failed.join(", "));
    }
    Ok(())
}

/// Every `.rs` file below `src`, as (path relative to `src` with `/`, text),
/// sorted by path.
fn read_src(src: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).expect("below src");
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                out.push((rel, text));
            }
        }
    }
    out.sort();
    Ok(out)
}

// ---------------------------------------------------------------------------
// Tokens: enough of Rust's lexer that comments and literals hide their text.

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
    /// A string, char or number literal (its text is never a path).
    Literal,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// The tokens of `src`, without comments; literals are one [`Tok::Literal`].
fn lex(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let (c, start_line) = (chars[i], line);
        let (next, tok) = if c == '\n' {
            line += 1;
            (i + 1, None)
        } else if c.is_whitespace() {
            (i + 1, None)
        } else if c == '/' && at(i + 1) == '/' {
            let end = chars[i..].iter().position(|&c| c == '\n');
            (end.map_or(chars.len(), |e| i + e), None)
        } else if c == '/' && at(i + 1) == '*' {
            (skip_block_comment(&chars, i, &mut line), None)
        } else if c == '"' {
            (skip_string(&chars, i + 1, &mut line), Some(Tok::Literal))
        } else if c == '\'' {
            let (end, tok) = lex_quote(&chars, i);
            (end, Some(tok))
        } else if c.is_ascii_digit() {
            (word_end(&chars, i), Some(Tok::Literal))
        } else if is_ident_start(c) {
            let (end, tok) = lex_word(&chars, i, &mut line);
            (end, Some(tok))
        } else if c == ':' && at(i + 1) == ':' {
            (i + 2, Some(Tok::PathSep))
        } else {
            (i + 1, Some(Tok::Punct(c)))
        };
        if let Some(tok) = tok {
            out.push(Token {
                tok,
                line: start_line,
            });
        }
        i = next;
    }
    out
}

/// The index after the identifier characters from `i`.
fn word_end(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && is_ident_char(chars[i]) {
        i += 1;
    }
    i
}

/// At a quote: a char literal (`'x'`, `'\''`, `'\u{..}'`), or the quote of a
/// lifetime or label (whose name follows as an identifier).
fn lex_quote(chars: &[char], i: usize) -> (usize, Tok) {
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    if at(i + 1) == '\\' {
        // Up to the next quote after the escaped character.
        let close = (i + 3..chars.len()).find(|&k| chars[k] == '\'');
        (close.map_or(chars.len(), |k| k + 1), Tok::Literal)
    } else if at(i + 2) == '\'' {
        (i + 3, Tok::Literal)
    } else {
        (i + 1, Tok::Punct('\''))
    }
}

/// At an identifier's first character: the identifier, a raw identifier
/// (`r#type`), or the string literal it prefixes (`r"..."`, `r#"..."#`,
/// `b"..."`, `br".."`, `c".."`).
fn lex_word(chars: &[char], begin: usize, line: &mut usize) -> (usize, Tok) {
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    let i = word_end(chars, begin);
    let word: String = chars[begin..i].iter().collect();
    if matches!(word.as_str(), "r" | "br" | "cr") && (at(i) == '"' || at(i) == '#') {
        let hashes = (i..).take_while(|&k| at(k) == '#').count();
        if at(i + hashes) == '"' {
            let end = skip_raw_string(chars, i + hashes + 1, hashes, line);
            return (end, Tok::Literal);
        }
        if word == "r" && hashes == 1 && is_ident_start(at(i + 1)) {
            let end = word_end(chars, i + 1);
            return (end, Tok::Ident(chars[i + 1..end].iter().collect()));
        }
    }
    if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
        return (skip_string(chars, i + 1, line), Tok::Literal);
    }
    (i, Tok::Ident(word))
}

/// The index after the block comment opening at `i` (they nest).
fn skip_block_comment(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('*')) => {
                depth += 1;
                i += 2;
            }
            ('*', Some('/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            (c, _) => {
                if c == '\n' {
                    *line += 1;
                }
                i += 1;
            }
        }
    }
    i
}

/// The index after the string whose text starts at `i` (after its quote).
fn skip_string(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                if chars.get(i + 1) == Some(&'\n') {
                    *line += 1;
                }
                i += 2;
            }
            '"' => return i + 1,
            c => {
                if c == '\n' {
                    *line += 1;
                }
                i += 1;
            }
        }
    }
    i
}

/// The index after the raw string whose text starts at `i`, closed by a
/// quote and `hashes` #s.
fn skip_raw_string(chars: &[char], mut i: usize, hashes: usize, line: &mut usize) -> usize {
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        if chars[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    i
}

// ---------------------------------------------------------------------------
// One file: the paths it names, and the names it holds (for crate roots).

/// How a reference's path began.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Anchor {
    /// `crate::`: the root of the file's own crate.
    Crate,
    /// `<crate_name>::`: the library's root.
    Library,
    /// `super::` or `self::`: from the module it is written in.
    Relative,
}

/// A path naming a module of the crate.
#[derive(Debug, Clone)]
struct Ref {
    line: usize,
    anchor: Anchor,
    /// The absolute path (from the crate root) it names.
    path: Vec<String>,
    /// As written (one leaf of a use tree: `crate::b::c`).
    text: String,
    /// In a `#[cfg(test)]` item.
    test: bool,
}

/// What [`parse`] reads from one file.
#[derive(Debug, Default)]
struct Parsed {
    refs: Vec<Ref>,
    /// Names of the file's top-level items and imports: what `crate::NAME`
    /// can be when the file is a crate root.
    items: BTreeSet<String>,
    /// A top-level glob import (`use x::*`): any name may be the root's.
    glob: bool,
    /// `mod name;` declarations at the top (their files are elsewhere), and
    /// whether each is `#[cfg(test)]`.
    children: Vec<(String, bool)>,
    /// `#![cfg(test)]`: the whole file is test code.
    test_only: bool,
}

/// One leaf of a path or use tree.
#[derive(Debug)]
struct Leaf {
    segs: Vec<String>,
    line: usize,
    /// The name it binds in a `use` (its last segment or alias; None for a glob).
    name: Option<String>,
}

/// A `#[cfg(test)]` item being read: where it started, and whether its block
/// has opened. It ends with that block, or at a `;` or `,` where it started
/// (a `use`, a field, a match arm), or when what holds it closes.
struct TestItem {
    depth: usize,
    parens: usize,
    entered: bool,
}

/// Keywords that a top-level item's name follows.
const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "const", "static", "type", "trait", "union",
];

/// Reads the references and top-level names of the file of module `module`
/// in crate `crate_ident`.
fn parse(module: &[String], crate_ident: &str, src: &str) -> Parsed {
    let toks = lex(src);
    let mut reader = Reader {
        toks: &toks,
        module,
        crate_ident,
        out: Parsed::default(),
        depth: 0,
        parens: 0,
        mods: Vec::new(),
        test: None,
        pending_test: false,
    };
    let mut i = 0;
    while i < toks.len() {
        i = reader.step(i);
    }
    reader.out
}

/// One file's tokens read in order, with where the reading is: the nesting,
/// the inline modules open, the test item inside.
struct Reader<'t> {
    toks: &'t [Token],
    module: &'t [String],
    crate_ident: &'t str,
    out: Parsed,
    /// Braces open.
    depth: usize,
    /// Parentheses and brackets open.
    parens: usize,
    /// Inline `mod name {` blocks open, with the depth inside each.
    mods: Vec<(String, usize)>,
    test: Option<TestItem>,
    /// A `#[cfg(test)]` was read: the next token starts a test item.
    pending_test: bool,
}

impl<'t> Reader<'t> {
    fn tok(&self, i: usize) -> Option<&'t Tok> {
        self.toks.get(i).map(|t| &t.tok)
    }

    fn ident(&self, i: usize) -> Option<&'t str> {
        match self.tok(i) {
            Some(Tok::Ident(w)) => Some(w),
            _ => None,
        }
    }

    /// The module being read: the file's and the inline blocks open.
    fn here(&self) -> Vec<String> {
        current_module(self.module, &self.mods)
    }

    /// Reads what starts at `i` (a token; all of an attribute, a use tree
    /// or a path); returns the index after it.
    fn step(&mut self, i: usize) -> usize {
        if let Some(end) = attribute_end(self.toks, i) {
            self.attribute(i, end);
            return end;
        }
        if self.pending_test {
            self.test = Some(TestItem {
                depth: self.depth,
                parens: self.parens,
                entered: false,
            });
            self.pending_test = false;
        }
        let toks = self.toks;
        match &toks[i].tok {
            Tok::Punct(c) => self.nesting(*c),
            Tok::Ident(w) if w == "use" => return self.use_item(i),
            Tok::Ident(_) if path_start(self.toks, i) => {
                if let Some(end) = self.path(i) {
                    return end;
                }
            }
            Tok::Ident(_) => self.declaration(i),
            _ => {}
        }
        i + 1
    }

    /// `#[cfg(test)]` marks the next item as test code, `#![cfg(test)]` at
    /// the top the whole file.
    fn attribute(&mut self, i: usize, end: usize) {
        if !is_cfg_test(&self.toks[i..end]) {
            return;
        }
        if self.tok(i + 1) == Some(&Tok::Punct('!')) {
            self.out.test_only |= self.depth == 0;
        } else if self.test.is_none() {
            self.pending_test = true;
        }
    }

    /// Braces, parentheses and separators: the nesting, and where a test
    /// item or an inline module ends.
    fn nesting(&mut self, c: char) {
        let test = &mut self.test;
        match c {
            '{' => {
                self.depth += 1;
                if let Some(t) = test.as_mut()
                    && t.depth + 1 == self.depth
                {
                    t.entered = true;
                }
            }
            '}' => {
                self.depth = self.depth.saturating_sub(1);
                let depth = self.depth;
                if self.mods.last().is_some_and(|(_, d)| *d > depth) {
                    self.mods.pop();
                }
                if test
                    .as_ref()
                    .is_some_and(|t| depth < t.depth || (t.entered && depth == t.depth))
                {
                    *test = None;
                }
            }
            '(' | '[' => self.parens += 1,
            ')' | ']' => {
                self.parens = self.parens.saturating_sub(1);
                let parens = self.parens;
                if test.as_ref().is_some_and(|t| parens < t.parens) {
                    *test = None;
                }
            }
            ';' | ',' => {
                let (depth, parens) = (self.depth, self.parens);
                if test
                    .as_ref()
                    .is_some_and(|t| !t.entered && t.depth == depth && t.parens == parens)
                {
                    *test = None;
                }
            }
            _ => {}
        }
    }

    /// A `mod` block or declaration; at the top, an item's name.
    fn declaration(&mut self, i: usize) {
        let top = self.depth == 0;
        let Some(word) = self.ident(i) else {
            return;
        };
        let name = match word {
            "mod" => {
                let Some(name) = self.ident(i + 1) else {
                    return;
                };
                match self.tok(i + 2) {
                    Some(Tok::Punct('{')) => self.mods.push((name.to_owned(), self.depth + 1)),
                    Some(Tok::Punct(';')) if top => {
                        let in_test = self.test.is_some();
                        self.out.children.push((name.to_owned(), in_test));
                    }
                    _ => {}
                }
                Some(name)
            }
            "macro_rules" => self.ident(i + 2),
            w if ITEM_KEYWORDS.contains(&w) => {
                let j = if self.ident(i + 1) == Some("mut") {
                    i + 2
                } else {
                    i + 1
                };
                self.ident(j).filter(|n| !ITEM_KEYWORDS.contains(n))
            }
            _ => None,
        };
        if let Some(name) = name.filter(|_| top) {
            self.out.items.insert(name.to_owned());
        }
    }

    /// A `use` item: its references, and at the top the names it binds.
    fn use_item(&mut self, i: usize) -> usize {
        let mut leaves = Vec::new();
        let mut j = i + 1;
        if self.tok(j) == Some(&Tok::PathSep) {
            j += 1;
        }
        let end = match anchor_at(self.toks, j, &self.here(), self.crate_ident) {
            Some(anchored) => {
                let end = parse_tree(self.toks, anchored.next, &anchored.base, &mut leaves);
                let in_test = self.test.is_some();
                self.out.refs.extend(anchored.refs(&leaves, in_test));
                end
            }
            None => parse_tree(self.toks, j, &[], &mut leaves),
        };
        if self.depth == 0 {
            for leaf in &leaves {
                match &leaf.name {
                    Some(name) => {
                        self.out.items.insert(name.clone());
                    }
                    None => self.out.glob = true,
                }
            }
        }
        end
    }

    /// A path in code: if it is anchored in the crate, its reference and the
    /// index after it.
    fn path(&mut self, i: usize) -> Option<usize> {
        let anchored = anchor_at(self.toks, i, &self.here(), self.crate_ident)?;
        let mut leaves = Vec::new();
        let end = parse_tree(self.toks, anchored.next, &anchored.base, &mut leaves);
        let in_test = self.test.is_some();
        self.out.refs.extend(anchored.refs(&leaves, in_test));
        Some(end)
    }
}

/// The module at a point of a file: the file's module and the inline blocks
/// open around it.
fn current_module(module: &[String], mods: &[(String, usize)]) -> Vec<String> {
    module
        .iter()
        .cloned()
        .chain(mods.iter().map(|(m, _)| m.clone()))
        .collect()
}

/// If an attribute (`#[..]` or `#![..]`) starts at `i`, the index after it.
fn attribute_end(toks: &[Token], i: usize) -> Option<usize> {
    if toks[i].tok != Tok::Punct('#') {
        return None;
    }
    let mut j = i + 1;
    if toks.get(j).map(|t| &t.tok) == Some(&Tok::Punct('!')) {
        j += 1;
    }
    if toks.get(j).map(|t| &t.tok) != Some(&Tok::Punct('[')) {
        return None;
    }
    let mut level = 0;
    for (k, t) in toks.iter().enumerate().skip(j) {
        match t.tok {
            Tok::Punct('[') => level += 1,
            Tok::Punct(']') => {
                level -= 1;
                if level == 0 {
                    return Some(k + 1);
                }
            }
            _ => {}
        }
    }
    Some(toks.len())
}

/// Whether the attribute's tokens are `#[cfg(test)]` (or `#![cfg(test)]`).
fn is_cfg_test(attr: &[Token]) -> bool {
    let inner: Vec<&Tok> = attr
        .iter()
        .map(|t| &t.tok)
        .filter(|t| **t != Tok::Punct('!'))
        .collect();
    let word = |w: &str| Tok::Ident(w.to_owned());
    inner
        == [
            &Tok::Punct('#'),
            &Tok::Punct('['),
            &word("cfg"),
            &Tok::Punct('('),
            &word("test"),
            &Tok::Punct(')'),
            &Tok::Punct(']'),
        ]
}

/// Whether the identifier at `i` begins a path: followed by `::`, not after
/// one, not `$crate`, not a visibility's `pub(in crate::x)`.
fn path_start(toks: &[Token], i: usize) -> bool {
    let tok = |k: usize| toks.get(k).map(|t| &t.tok);
    if tok(i + 1) != Some(&Tok::PathSep) {
        return false;
    }
    let Some(prev) = i.checked_sub(1).and_then(tok) else {
        return true;
    };
    let after_in = *prev == Tok::Ident("in".to_owned())
        && i.checked_sub(2).and_then(tok) == Some(&Tok::Punct('('));
    !(matches!(prev, Tok::PathSep | Tok::Punct('$')) || after_in)
}

/// A path's anchor, read: where its segments start from.
struct Anchored {
    anchor: Anchor,
    /// The absolute module path the anchor stands for.
    base: Vec<String>,
    /// The anchor as written (`super::super`).
    text: String,
    /// The index of the first token after the anchor's last `::`.
    next: usize,
}

impl Anchored {
    fn refs<'a>(&'a self, leaves: &'a [Leaf], test: bool) -> impl Iterator<Item = Ref> + 'a {
        leaves.iter().map(move |leaf| {
            let mut text = self.text.clone();
            for s in &leaf.segs[self.base.len().min(leaf.segs.len())..] {
                text.push_str("::");
                text.push_str(s);
            }
            if leaf.name.is_none() {
                text.push_str("::*");
            }
            Ref {
                line: leaf.line,
                anchor: self.anchor,
                path: leaf.segs.clone(),
                text,
                test,
            }
        })
    }
}

/// The anchor at `i` (`crate::`, `<crate_ident>::`, `self::`, `super::`..),
/// seen from module `here`; None if the path starts elsewhere (std, a local
/// module, a type) or climbs above the root.
fn anchor_at(toks: &[Token], i: usize, here: &[String], crate_ident: &str) -> Option<Anchored> {
    let ident = |k: usize| match toks.get(k).map(|t| &t.tok) {
        Some(Tok::Ident(w)) => Some(w.as_str()),
        _ => None,
    };
    let sep = |k: usize| toks.get(k).map(|t| &t.tok) == Some(&Tok::PathSep);
    let word = ident(i)?;
    if !sep(i + 1) {
        return None;
    }
    let (anchor, mut base) = match word {
        "crate" => (Anchor::Crate, Vec::new()),
        w if w == crate_ident => (Anchor::Library, Vec::new()),
        "self" => (Anchor::Relative, here.to_vec()),
        "super" => {
            let mut base = here.to_vec();
            base.pop()?;
            (Anchor::Relative, base)
        }
        _ => return None,
    };
    let mut text = word.to_owned();
    let mut next = i + 2;
    while anchor == Anchor::Relative && ident(next) == Some("super") && sep(next + 1) {
        base.pop()?;
        text.push_str("::super");
        next += 2;
    }
    Some(Anchored {
        anchor,
        base,
        text,
        next,
    })
}

/// Reads the path or use tree at `i` below `prefix`, pushing each leaf;
/// returns the index after it. In code the path ends at its first
/// non-segment (`(`, `<`, `!`, ...).
fn parse_tree(toks: &[Token], mut i: usize, prefix: &[String], out: &mut Vec<Leaf>) -> usize {
    let tok = |k: usize| toks.get(k).map(|t| &t.tok);
    let mut segs = prefix.to_vec();
    let mut line = toks.get(i).map_or(0, |t| t.line);
    loop {
        match tok(i) {
            Some(Tok::Ident(w)) => {
                // `{self, ..}` names the prefix itself.
                if !(w == "self" && segs.len() == prefix.len()) {
                    segs.push(w.clone());
                }
                line = toks[i].line;
                i += 1;
                if tok(i) == Some(&Tok::PathSep) {
                    i += 1;
                    continue;
                }
                let mut name = segs.last().cloned();
                if tok(i) == Some(&Tok::Ident("as".to_owned())) {
                    if let Some(Tok::Ident(alias)) = tok(i + 1) {
                        name = Some(alias.clone());
                    }
                    i += 2;
                }
                out.push(Leaf { segs, line, name });
                return i;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match tok(i) {
                        None => return i,
                        Some(Tok::Punct('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        Some(_) => {
                            let before = i;
                            i = parse_tree(toks, i, &segs, out);
                            if i == before {
                                i += 1;
                            }
                        }
                    }
                }
            }
            Some(Tok::Punct('*')) => {
                line = toks[i].line;
                out.push(Leaf {
                    segs,
                    line,
                    name: None,
                });
                return i + 1;
            }
            _ => {
                if segs.len() > prefix.len() {
                    let name = segs.last().cloned();
                    out.push(Leaf { segs, line, name });
                }
                return i;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// A crate: files, references resolved to files, and what is wrong.

/// The module path of a file of `src/` (`a/b.rs`: a::b; `a/mod.rs`: a;
/// `lib.rs`, `main.rs`: the root).
fn module_of(rel: &str) -> Vec<String> {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    } else if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

/// The layer a file belongs to.
fn layer_of(rel: &str, layers: &[Layer]) -> Option<usize> {
    layers.iter().position(|l| {
        l.files.iter().any(|f| match f.strip_suffix('/') {
            Some(dir) => rel.strip_prefix(dir).is_some_and(|r| r.starts_with('/')),
            None => rel == *f,
        })
    })
}

/// Where a reference goes.
#[derive(Debug, PartialEq)]
enum Target {
    File(usize),
    /// It names no file and no item of the root: why.
    Unresolved(String),
}

/// A crate's files, parsed, with the module each is.
struct CrateFiles<'a> {
    names: Vec<&'a str>,
    parsed: Vec<Parsed>,
    /// Module path -> file (crate roots excluded).
    modules: BTreeMap<Vec<String>, usize>,
    lib: Option<usize>,
    main: Option<usize>,
    /// Files that are test code whole (`#[cfg(test)] mod x;`, `#![cfg(test)]`).
    test_files: BTreeSet<usize>,
}

impl<'a> CrateFiles<'a> {
    fn new(crate_name: &str, files: &'a [(String, String)]) -> Self {
        let crate_ident = crate_name.replace('-', "_");
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        let parsed: Vec<Parsed> = files
            .iter()
            .map(|(n, text)| parse(&module_of(n), &crate_ident, text))
            .collect();
        let position = |root: &str| names.iter().position(|n| *n == root);
        let (lib, main) = (position("lib.rs"), position("main.rs"));
        let modules = names
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != lib && Some(*i) != main)
            .map(|(i, n)| (module_of(n), i))
            .collect();
        let mut crate_files = CrateFiles {
            names,
            parsed,
            modules,
            lib,
            main,
            test_files: BTreeSet::new(),
        };
        crate_files.test_files = crate_files.find_test_files();
        crate_files
    }

    /// The files that are test code whole, their children included.
    fn find_test_files(&self) -> BTreeSet<usize> {
        let mut test: BTreeSet<usize> = (0..self.names.len())
            .filter(|&f| self.parsed[f].test_only)
            .collect();
        loop {
            let before = test.len();
            for (f, parsed) in self.parsed.iter().enumerate() {
                let module = module_of(self.names[f]);
                for (child, child_test) in &parsed.children {
                    let mut path = module.clone();
                    path.push(child.clone());
                    if let Some(&c) = self.modules.get(&path)
                        && (*child_test || test.contains(&f))
                    {
                        test.insert(c);
                    }
                }
            }
            if test.len() == before {
                return test;
            }
        }
    }

    /// The root whose items `crate::NAME` (or `<crate>::NAME`) in file `from`
    /// names: main.rs for main.rs itself and for the modules it declares (and
    /// lib.rs does not), else lib.rs if there is one.
    fn root_for(&self, from: usize, anchor: Anchor) -> Option<usize> {
        if anchor == Anchor::Library {
            return self.lib.or(self.main);
        }
        let declares = |root: Option<usize>, name: &str| {
            root.is_some_and(|r| self.parsed[r].children.iter().any(|(c, _)| c == name))
        };
        let top = module_of(self.names[from]).into_iter().next();
        let in_binary = top.is_some_and(|m| declares(self.main, &m) && !declares(self.lib, &m));
        if Some(from) == self.main || in_binary {
            return self.main;
        }
        self.lib.or(self.main)
    }

    fn resolve(&self, from: usize, r: &Ref) -> Target {
        for k in (1..=r.path.len()).rev() {
            if let Some(&f) = self.modules.get(&r.path[..k]) {
                return Target::File(f);
            }
        }
        let Some(root) = self.root_for(from, r.anchor) else {
            return Target::Unresolved("the crate has no lib.rs or main.rs".into());
        };
        let Some(first) = r.path.first() else {
            return Target::File(root);
        };
        let items = &self.parsed[root];
        let root_name = self.names[root];
        if items.children.iter().any(|(c, _)| c == first) {
            Target::Unresolved(format!(
                "{root_name} declares mod {first}, but there is no {first}.rs or {first}/mod.rs"
            ))
        } else if items.items.contains(first) || items.glob {
            Target::File(root)
        } else {
            Target::Unresolved(format!("no module, and no item of {root_name}, is {first}"))
        }
    }
}

/// One reference between two files, where it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    from: usize,
    to: usize,
    line: usize,
    text: String,
}

/// An import circle: its files, and one way round it.
#[derive(Debug, PartialEq)]
pub struct Circle {
    members: Vec<String>,
    /// Each step: the reference (file:line path) and the file it goes to.
    path: Vec<String>,
}

/// An import from a layer to one it may not import.
#[derive(Debug, PartialEq)]
pub struct Upward {
    file: String,
    line: usize,
    text: String,
    from_layer: &'static str,
    to_layer: &'static str,
}

/// What `layout` found in one crate.
#[derive(Debug)]
pub struct CrateReport {
    name: String,
    files: usize,
    /// Distinct (file, file) pairs with at least one reference.
    edges: usize,
    circles: Vec<Circle>,
    /// None: the crate has no layer table.
    upward: Option<Vec<Upward>>,
    unplaced: Option<Vec<String>>,
    /// References to nothing found (file:line path: why); not counted.
    unresolved: Vec<String>,
    /// References in test code, not counted.
    test_refs: usize,
}

/// Checks one crate's files (path relative to src/, text).
fn check_crate(
    name: &str,
    files: &[(String, String)],
    layers: Option<&'static [Layer]>,
) -> CrateReport {
    let crate_files = CrateFiles::new(name, files);
    let (edges, unresolved, test_refs) = resolve_edges(&crate_files);
    let pairs: BTreeSet<(usize, usize)> = edges.iter().map(|e| (e.from, e.to)).collect();
    CrateReport {
        name: name.to_owned(),
        files: files.len(),
        edges: pairs.len(),
        circles: circles(&crate_files.names, &edges),
        upward: layers.map(|l| upward_imports(&crate_files.names, &edges, l)),
        unplaced: layers.map(|l| {
            crate_files
                .names
                .iter()
                .filter(|n| layer_of(n, l).is_none())
                .map(|n| n.to_string())
                .collect()
        }),
        unresolved,
        test_refs,
    }
}

/// Every reference of the crate outside test code that goes to another file;
/// the unresolved ones (described), and how many test code holds.
fn resolve_edges(c: &CrateFiles) -> (Vec<Edge>, Vec<String>, usize) {
    let mut edges = Vec::new();
    let mut unresolved = Vec::new();
    let mut test_refs = 0;
    for (from, parsed) in c.parsed.iter().enumerate() {
        let file_is_test = c.test_files.contains(&from);
        for r in &parsed.refs {
            match c.resolve(from, r) {
                Target::File(to) if to == from => {}
                _ if r.test || file_is_test => test_refs += 1,
                Target::File(to) => edges.push(Edge {
                    from,
                    to,
                    line: r.line,
                    text: r.text.clone(),
                }),
                Target::Unresolved(why) => {
                    unresolved.push(format!("{}:{} {}: {why}", c.names[from], r.line, r.text));
                }
            }
        }
    }
    (edges, unresolved, test_refs)
}

/// The strongly connected components of more than one file (Tarjan's
/// algorithm), each with its members sorted and one shortest way round from
/// the first.
fn circles(names: &[&str], edges: &[Edge]) -> Vec<Circle> {
    let n = names.len();
    let mut succ: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for e in edges {
        succ[e.from].insert(e.to);
    }
    let components = strongly_connected(&succ);
    components
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut members| {
            members.sort_by_key(|&f| names[f]);
            let inside: BTreeSet<usize> = members.iter().copied().collect();
            let way = shortest_cycle(members[0], &succ, &inside);
            let path = way
                .windows(2)
                .map(|w| {
                    let e = edges
                        .iter()
                        .find(|e| e.from == w[0] && e.to == w[1])
                        .expect("an edge of the cycle");
                    format!("{}:{} {} -> {}", names[e.from], e.line, e.text, names[e.to])
                })
                .collect();
            Circle {
                members: members.iter().map(|&f| names[f].to_owned()).collect(),
                path,
            }
        })
        .collect()
}

/// Tarjan's strongly connected components of the graph `succ`.
fn strongly_connected(succ: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct State<'g> {
        succ: &'g [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.succ[v].iter() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let n = succ.len();
    let mut s = State {
        succ,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// A shortest way from `start` back to itself inside `inside` (breadth
/// first): the files in order, `start` at both ends.
fn shortest_cycle(start: usize, succ: &[BTreeSet<usize>], inside: &BTreeSet<usize>) -> Vec<usize> {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in succ[v].iter().filter(|w| inside.contains(w)) {
            if w == start {
                let mut way = vec![start, v];
                let mut at = v;
                while at != start {
                    at = came_from[&at];
                    way.push(at);
                }
                way.reverse();
                return way;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    vec![start]
}

/// Every reference from a file of one layer to a layer it may not import.
fn upward_imports(names: &[&str], edges: &[Edge], layers: &'static [Layer]) -> Vec<Upward> {
    edges
        .iter()
        .filter_map(|e| {
            let from = layer_of(names[e.from], layers)?;
            let to = layer_of(names[e.to], layers)?;
            let allowed = from == to || layers[from].may_import.contains(&layers[to].name);
            (!allowed).then(|| Upward {
                file: names[e.from].to_owned(),
                line: e.line,
                text: e.text.clone(),
                from_layer: layers[from].name,
                to_layer: layers[to].name,
            })
        })
        .collect()
}

impl CrateReport {
    /// Whether anything is wrong: a circle, an upward import, an unplaced file.
    fn failed(&self) -> bool {
        !self.circles.is_empty()
            || self.upward.as_ref().is_some_and(|u| !u.is_empty())
            || self.unplaced.as_ref().is_some_and(|u| !u.is_empty())
    }

    /// One line: files, edges, circles, upward imports, unplaced.
    fn summary(&self) -> String {
        let mut s = format!(
            "{:<11} {:>3} files {:>4} edges  circles {}",
            self.name,
            self.files,
            self.edges,
            self.circles.len()
        );
        match (&self.upward, &self.unplaced) {
            (Some(up), Some(unplaced)) => write!(
                s,
                "  upward imports {}  unplaced {}",
                up.len(),
                unplaced.len()
            )
            .expect("a String"),
            _ => s.push_str("  (no layer table)"),
        }
        let mut notes = Vec::new();
        if self.test_refs > 0 {
            notes.push(format!(
                "{} test-code references not counted",
                self.test_refs
            ));
        }
        if !self.unresolved.is_empty() {
            notes.push(format!("{} unresolved", self.unresolved.len()));
        }
        if !notes.is_empty() {
            write!(s, "  ({})", notes.join(", ")).expect("a String");
        }
        s.push_str(if self.failed() { "  FAIL" } else { "  ok" });
        s
    }

    /// Every circle, upward import, unplaced file and unresolved path.
    fn details(&self) -> String {
        let mut s = String::new();
        let name = &self.name;
        for c in &self.circles {
            let _ = writeln!(
                s,
                "\n{name}: circle of {} files: {}",
                c.members.len(),
                c.members.join(", ")
            );
            for step in &c.path {
                let _ = writeln!(s, "    {step}");
            }
        }
        if let Some(up) = self.upward.as_ref().filter(|u| !u.is_empty()) {
            let _ = writeln!(s, "\n{name}: {} upward imports:", up.len());
            for u in up {
                let _ = writeln!(
                    s,
                    "    {}:{} {}: {} may not import {}",
                    u.file, u.line, u.text, u.from_layer, u.to_layer
                );
            }
        }
        if let Some(unplaced) = self.unplaced.as_ref().filter(|u| !u.is_empty()) {
            let _ = writeln!(
                s,
                "\n{name}: {} files in no layer (see ZPROF_LAYERS in xtask/src/layout.rs):",
                unplaced.len()
            );
            for f in unplaced {
                let _ = writeln!(s, "    {f}");
            }
        }
        if !self.unresolved.is_empty() {
            let _ = writeln!(
                s,
                "\n{name}: {} paths name no file or item of the root (not counted):",
                self.unresolved.len()
            );
            for u in &self.unresolved {
                let _ = writeln!(s, "    {u}");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    }

    /// The (from, to, line, text) of every counted reference.
    fn edges_of(name: &str, list: &[(&str, &str)]) -> Vec<(String, String, usize, String)> {
        let fs = files(list);
        let c = CrateFiles::new(name, &fs);
        let (edges, _, _) = resolve_edges(&c);
        edges
            .into_iter()
            .map(|e| {
                (
                    c.names[e.from].to_owned(),
                    c.names[e.to].to_owned(),
                    e.line,
                    e.text,
                )
            })
            .collect()
    }

    fn targets(name: &str, list: &[(&str, &str)]) -> Vec<(String, String)> {
        edges_of(name, list)
            .into_iter()
            .map(|(from, to, _, _)| (from, to))
            .collect()
    }

    fn pair(a: &str, b: &str) -> (String, String) {
        (a.to_owned(), b.to_owned())
    }

    #[test]
    fn a_circle_is_found_with_a_way_round() {
        let r = check_crate(
            "k",
            &files(&[
                ("lib.rs", "pub mod a; pub mod b; pub mod c; pub mod d;"),
                ("a.rs", "use crate::b::B;\n"),
                ("b.rs", "\n\nfn f() { crate::c::g() }"),
                ("c.rs", "use crate::{a::A, d};"),
                ("d.rs", "pub struct D;"),
            ]),
            None,
        );
        assert_eq!(r.circles.len(), 1);
        assert_eq!(r.circles[0].members, ["a.rs", "b.rs", "c.rs"]);
        assert_eq!(
            r.circles[0].path,
            [
                "a.rs:1 crate::b::B -> b.rs",
                "b.rs:3 crate::c::g -> c.rs",
                "c.rs:1 crate::a::A -> a.rs"
            ]
        );
        assert!(r.failed());
        assert_eq!(r.edges, 4);
    }

    #[test]
    fn no_circle_when_imports_go_one_way() {
        let r = check_crate(
            "k",
            &files(&[
                ("lib.rs", "pub mod a; pub mod b;"),
                ("a.rs", "use crate::b::B;"),
                ("b.rs", "pub struct B;"),
            ]),
            None,
        );
        assert!(r.circles.is_empty());
        assert!(!r.failed());
    }

    #[test]
    fn an_upward_import_is_found_with_its_line() {
        let r = check_crate(
            "zprof",
            &files(&[
                ("lib.rs", "pub mod units; pub mod render; pub mod zfs;"),
                (
                    "units.rs",
                    "//! Formatters.\n\nuse crate::render::report::{table, Row};\n",
                ),
                ("render/report.rs", "use crate::units::human_ns;"),
                ("render/mod.rs", "pub mod report;"),
                ("zfs/target.rs", "use crate::units;"),
                ("stray.rs", ""),
            ]),
            Some(ZPROF_LAYERS),
        );
        let up = r.upward.as_ref().unwrap();
        assert_eq!(
            up.iter()
                .map(|u| (u.file.as_str(), u.line, u.text.as_str(), u.to_layer))
                .collect::<Vec<_>>(),
            [
                ("units.rs", 3, "crate::render::report::table", "render"),
                ("units.rs", 3, "crate::render::report::Row", "render"),
            ]
        );
        assert_eq!(r.unplaced.as_deref(), Some(&["stray.rs".to_owned()][..]));
        assert!(r.failed());
    }

    #[test]
    fn collect_and_analyze_meet_only_in_the_recording() {
        let r = check_crate(
            "zprof",
            &files(&[
                ("lib.rs", ""),
                ("collect/session.rs", "use crate::analyze::findings::F;"),
                ("analyze/findings.rs", "use crate::recording::Recording;"),
                ("recording/mod.rs", "pub struct Recording;"),
            ]),
            Some(ZPROF_LAYERS),
        );
        let up = r.upward.unwrap();
        assert_eq!(up.len(), 1);
        assert_eq!((up[0].from_layer, up[0].to_layer), ("collect", "analyze"));
    }

    #[test]
    fn the_layer_table_only_points_down() {
        for (i, layer) in ZPROF_LAYERS.iter().enumerate() {
            for m in layer.may_import {
                let j = ZPROF_LAYERS.iter().position(|l| l.name == *m);
                assert!(
                    j.is_some_and(|j| j < i),
                    "{} may import {m}, not a lower layer",
                    layer.name
                );
            }
        }
        let may = |a: &str, b: &str| {
            ZPROF_LAYERS
                .iter()
                .find(|l| l.name == a)
                .unwrap()
                .may_import
                .contains(&b)
        };
        assert!(!may("collect", "analyze") && !may("analyze", "collect"));
        assert_eq!(layer_of("zfs/offsets/btf.rs", ZPROF_LAYERS), Some(1));
        assert_eq!(layer_of("zfsx.rs", ZPROF_LAYERS), None);
        assert_eq!(layer_of("main.rs", ZPROF_LAYERS), Some(7));
    }

    #[test]
    fn nested_use_trees_are_read_leaf_by_leaf() {
        let e = edges_of(
            "k",
            &[
                ("lib.rs", "mod a; mod b;"),
                ("a.rs", ""),
                ("b/mod.rs", "mod c; mod d;"),
                ("b/c.rs", ""),
                ("b/d.rs", ""),
                (
                    "x.rs",
                    "use crate::{a, b::{c,\n  d::{self, D as E}}, b::*};",
                ),
            ],
        );
        let seen: Vec<(&str, usize, &str)> = e
            .iter()
            .map(|(_, to, line, text)| (to.as_str(), *line, text.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("a.rs", 1, "crate::a"),
                ("b/c.rs", 1, "crate::b::c"),
                ("b/d.rs", 2, "crate::b::d"),
                ("b/d.rs", 2, "crate::b::d::D"),
                ("b/mod.rs", 2, "crate::b::*"),
            ]
        );
    }

    #[test]
    fn super_and_self_are_resolved_from_where_they_are_written() {
        let t = targets(
            "k",
            &[
                ("main.rs", "mod guest; fn run() {}"),
                ("guest.rs", "mod check; mod serve; pub enum Variant {}"),
                (
                    "guest/check.rs",
                    "use super::{Variant, serve::check_serve};\n\
                     fn f() { super::super::run(); self::g(); }\n\
                     mod inner { use super::super::serve::x; }",
                ),
                ("guest/serve.rs", "use super::super::run;"),
                ("ledger/mod.rs", "use super::guest::Variant;"),
            ],
        );
        assert_eq!(
            t,
            [
                pair("guest/check.rs", "guest.rs"),
                pair("guest/check.rs", "guest/serve.rs"),
                pair("guest/check.rs", "main.rs"),
                pair("guest/check.rs", "guest/serve.rs"),
                pair("guest/serve.rs", "main.rs"),
                pair("ledger/mod.rs", "guest.rs"),
            ]
        );
    }

    #[test]
    fn test_code_is_tallied_not_counted() {
        let fs = files(&[
            (
                "lib.rs",
                "pub mod a; pub mod b; #[cfg(test)]\nmod fixtures;",
            ),
            (
                "a.rs",
                "use crate::b::B;\n\
                 #[cfg(test)]\n\
                 mod tests {\n    use super::*;\n    use crate::b::fixture;\n    fn t() { crate::b::f(); }\n}\n\
                 #[cfg(test)] use crate::b::only_in_tests;\n\
                 fn after() { crate::b::g(); }",
            ),
            ("b.rs", "pub struct B;"),
            ("fixtures.rs", "use crate::a::A;"),
        ]);
        let r = check_crate("k", &fs, None);
        assert_eq!(r.test_refs, 4);
        let e = edges_of(
            "k",
            &fs.iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            e.iter().map(|x| (x.2, x.3.as_str())).collect::<Vec<_>>(),
            [(1, "crate::b::B"), (9, "crate::b::g")]
        );
    }

    #[test]
    fn comments_strings_and_visibilities_are_not_paths() {
        let t = targets(
            "k",
            &[
                ("lib.rs", "pub mod a; pub mod b;"),
                ("a.rs", ""),
                (
                    "b.rs",
                    "// use crate::a::x;\n\
                     /* crate::a::y /* nested crate::a */ crate::a */\n\
                     /// [`crate::a::z`]\n\
                     pub(crate) fn f() -> &'static str { \"crate::a::s\" }\n\
                     pub(in crate::a) fn g() {}\n\
                     const R: &str = r#\"crate::a \"quoted\"\"#;\n\
                     const C: char = '\"'; const Q: char = '\\''; fn h<'a>(x: &'a u8) {}\n\
                     macro_rules! m { () => { $crate::a::m() } }\n\
                     fn real() { crate::a::real() }",
                ),
            ],
        );
        assert_eq!(t, [pair("b.rs", "a.rs")]);
    }

    #[test]
    fn root_items_the_library_name_and_unresolved_paths() {
        let fs = files(&[
            (
                "lib.rs",
                "pub mod cli; pub mod gone; pub const VERSION: &str = \"1\";\nuse std::path::Path;",
            ),
            ("main.rs", "fn main() { k::cli::run(); k::VERSION; }"),
            (
                "cli.rs",
                "use crate::VERSION;\nuse crate::Path;\nuse crate::gone::x;\nuse crate::nothing;",
            ),
        ]);
        let r = check_crate("k", &fs, None);
        assert_eq!(
            r.unresolved,
            [
                "cli.rs:3 crate::gone::x: lib.rs declares mod gone, but there is no gone.rs or gone/mod.rs",
                "cli.rs:4 crate::nothing: no module, and no item of lib.rs, is nothing"
            ]
        );
        let t = targets(
            "k",
            &fs.iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            t,
            [
                pair("main.rs", "cli.rs"),
                pair("main.rs", "lib.rs"),
                pair("cli.rs", "lib.rs"),
                pair("cli.rs", "lib.rs"),
            ]
        );
    }

    #[test]
    fn a_binarys_modules_name_the_items_of_main() {
        // zprof-ebpf's shape: a lib.rs of its own, the programs' modules under main.rs.
        let fs = files(&[
            ("lib.rs", "#![no_std]"),
            (
                "main.rs",
                "mod offcpu;\nstatic CONFIG: u32 = 0;\nfn bump() {}",
            ),
            ("offcpu.rs", "use crate::{CONFIG, bump};"),
        ]);
        let r = check_crate("k", &fs, None);
        assert!(r.unresolved.is_empty(), "{:?}", r.unresolved);
        let t = targets(
            "k",
            &fs.iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            t,
            [pair("offcpu.rs", "main.rs"), pair("offcpu.rs", "main.rs")]
        );
    }

    #[test]
    fn module_paths_of_files() {
        assert_eq!(module_of("lib.rs"), Vec::<String>::new());
        assert_eq!(module_of("zfs/offsets/mod.rs"), ["zfs", "offsets"]);
        assert_eq!(module_of("guest/check.rs"), ["guest", "check"]);
    }
}
