//! Dependencies between the crate's top-level modules point one way: this
//! test fails on any import cycle between them (`report` → `rules` →
//! `report`, ...), naming the cycle and one `file:line` reference for each
//! of its edges. The layers are described in `docs/ARCHITECTURE.md`
//! ("Module layers").
//!
//! It reads the crate's sources with `syn` from `src/lib.rs` down, the way
//! the compiler finds them (`mod x;` → `x.rs` or `x/mod.rs`, `#[path]`), and
//! counts, for each top-level module, every path into another one: `use
//! crate::x::..` (grouped `use crate::{x::.., y}` too), `crate::x::..` in
//! expressions, types and patterns, inside macro calls and attributes (a
//! clap `value_parser = crate::x::f` is a dependency as well), and `super::x`
//! that climbs to the crate root. Test code may do what it likes: items
//! under `#[cfg(test)]` (and the files they declare) and `*_tests.rs` files
//! are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Where an edge was first seen.
#[derive(Debug, Clone)]
struct Ref {
    file: String,
    line: usize,
}

/// Top-level module → module it uses → the first reference found.
type Edges = BTreeMap<String, BTreeMap<String, Ref>>;

/// Whether `attrs` hold `#[cfg(test)]` (or `#[cfg(all(test, ..))]`).
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let Ok(list) = a.meta.require_list() else {
            return false;
        };
        let text = list.tokens.to_string();
        text == "test"
            || (text.starts_with("all") && text.contains("test") && !text.contains("not"))
    })
}

/// `#[path = "..."]` of a `mod` item.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Collects one file's references to top-level modules.
struct Collector<'a> {
    /// The top-level modules' names.
    tops: &'a BTreeSet<String>,
    /// The top-level module the file belongs to.
    top: &'a str,
    /// Depth of the module being read below the crate root (the top-level
    /// module's own file is 1), for `super::` chains.
    depth: usize,
    /// The file, relative to `src/`, for messages.
    file: &'a str,
    /// `mod x;` declarations found (not test-only), with their `#[path]`,
    /// and the depth of the module declaring them.
    file_mods: Vec<(String, Option<String>, usize)>,
    edges: &'a mut Edges,
}

impl Collector<'_> {
    /// Counts a reference from the first segments of a path.
    fn note(&mut self, segments: &[String], line: usize) {
        let supers = segments.iter().take_while(|s| *s == "super").count();
        let target = match segments.first().map(String::as_str) {
            Some("crate") => segments.get(1),
            Some("super") if supers == self.depth => segments.get(supers),
            _ => None,
        };
        let Some(target) = target else { return };
        if target != self.top && self.tops.contains(target) {
            self.edges
                .entry(self.top.to_owned())
                .or_default()
                .entry(target.clone())
                .or_insert_with(|| Ref {
                    file: self.file.to_owned(),
                    line,
                });
        }
    }

    /// Every path of a `use` tree, as its segment lists.
    fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                Self::use_paths(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                full.push(n.ident.to_string());
                out.push(full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                out.push(full);
            }
            syn::UseTree::Glob(_) => out.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    Self::use_paths(t, prefix, out);
                }
            }
        }
    }

    /// Paths written as tokens (macro calls, attributes): `crate :: x` and
    /// `super :: ... :: x`.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.scan_tokens(g.stream()),
                TokenTree::Ident(id) if *id == "crate" || *id == "super" => {
                    let line = id.span().start().line;
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    // `::` is two `:` puncts, then an identifier.
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(next)) =
                        (trees.get(j), trees.get(j + 1), trees.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        match next {
                            TokenTree::Ident(n) => segments.push(n.to_string()),
                            // `crate::{a, b}` inside a macro: each item.
                            TokenTree::Group(g) => {
                                for item in g.stream().to_string().split(',') {
                                    let first = item.split("::").next().unwrap_or("").trim();
                                    let mut s = segments.clone();
                                    s.push(first.to_owned());
                                    self.note(&s, line);
                                }
                                break;
                            }
                            _ => break,
                        }
                        j += 3;
                    }
                    self.note(&segments, line);
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::ExternCrate(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::ForeignMod(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::TraitAlias(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Union(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        match &m.content {
            // An inline module: one level deeper, same file.
            Some((_, items)) => {
                for a in &m.attrs {
                    self.visit_attribute(a);
                }
                self.depth += 1;
                for item in items {
                    self.visit_item(item);
                }
                self.depth -= 1;
            }
            None => self
                .file_mods
                .push((m.ident.to_string(), path_attr(&m.attrs), self.depth)),
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        Collector::use_paths(&u.tree, &mut Vec::new(), &mut paths);
        let line = u.use_token.span.start().line;
        for p in paths {
            self.note(&p, line);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.note(&segments, line);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.scan_tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if let syn::Meta::List(list) = &a.meta {
            self.scan_tokens(list.tokens.clone());
        }
    }
}

/// The file of `mod name;` declared in `file` (whose own module's children
/// live in `dir`), as the compiler finds it.
fn module_file(file: &Path, dir: &Path, name: &str, path: Option<&str>) -> Option<PathBuf> {
    if let Some(p) = path {
        return Some(file.parent()?.join(p));
    }
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// The directory holding the children of the module read from `file`.
fn children_dir(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new("")).to_owned();
    match file.file_name().and_then(|n| n.to_str()) {
        Some("mod.rs" | "lib.rs" | "main.rs") => parent,
        _ => parent.join(file.file_stem().unwrap_or_default()),
    }
}

/// Reads `file` (module `top`, at `depth`) and the files its modules declare.
fn read_module(
    src: &Path,
    file: &Path,
    top: &str,
    depth: usize,
    tops: &BTreeSet<String>,
    edges: &mut Edges,
) {
    let is_tests_file = file
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with("_tests.rs"));
    if is_tests_file {
        return;
    }
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let rel = file.strip_prefix(src).unwrap_or(file).display().to_string();
    let mut c = Collector {
        tops,
        top,
        depth,
        file: &rel,
        file_mods: Vec::new(),
        edges,
    };
    for item in &ast.items {
        c.visit_item(item);
    }
    let mods = std::mem::take(&mut c.file_mods);
    let dir = children_dir(file);
    for (name, path, at) in mods {
        let child = module_file(file, &dir, &name, path.as_deref())
            .unwrap_or_else(|| panic!("{rel}: no file for `mod {name};`"));
        read_module(src, &child, top, at + 1, tops, edges);
    }
}

/// The top-level modules of `src/lib.rs` that are not test-only, with their files.
fn top_modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let lib = src.join("lib.rs");
    let ast = syn::parse_file(&std::fs::read_to_string(&lib).unwrap()).unwrap();
    ast.items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if m.content.is_none() && !is_test_only(&m.attrs) => {
                let name = m.ident.to_string();
                let file = module_file(&lib, src, &name, path_attr(&m.attrs).as_deref())
                    .unwrap_or_else(|| panic!("lib.rs: no file for `mod {name};`"));
                Some((name, file))
            }
            _ => None,
        })
        .collect()
}

/// Every edge between top-level modules of the crate under `src`.
fn module_edges(src: &Path) -> Edges {
    let tops = top_modules(src);
    let names: BTreeSet<String> = tops.keys().cloned().collect();
    let mut edges = Edges::new();
    for (name, file) in &tops {
        read_module(src, file, name, 1, &names, &mut edges);
    }
    edges
}

/// A cycle of `graph` as its nodes in order, the first repeated at the
/// end (`[a, b, a]`); `None` when the graph has none.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        OnPath,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_owned(), Mark::OnPath);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next) {
                Some(Mark::OnPath) => {
                    let start = path.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(c) = visit(next, graph, marks, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if !marks.contains_key(node)
            && let Some(c) = visit(node, graph, &mut marks, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

fn graph_of(edges: &Edges) -> BTreeMap<String, BTreeSet<String>> {
    edges
        .iter()
        .map(|(from, to)| (from.clone(), to.keys().cloned().collect()))
        .collect()
}

#[test]
fn top_level_modules_have_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = module_edges(&src);
    // The reader found the crate's modules and their uses (a reader that
    // finds nothing would pass on any code).
    assert!(
        edges.get("app").is_some_and(|to| to.contains_key("cli")),
        "app uses cli (app.rs), yet no such edge was found: {edges:?}"
    );
    if let Some(cycle) = find_cycle(&graph_of(&edges)) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let r = &edges[&w[0]][&w[1]];
                format!("  {} -> {}: agent/src/{}:{}", w[0], w[1], r.file, r.line)
            })
            .collect();
        panic!(
            "import cycle between top-level modules: {}\n{}\n\
             dependencies must point one way (docs/ARCHITECTURE.md, \"Module layers\"): \
             move what both sides need into a module below both",
            cycle.join(" -> "),
            steps.join("\n")
        );
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle_and_only_a_cycle() {
    let graph = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry((*a).into()).or_default().insert((*b).into());
            g.entry((*b).into()).or_default();
        }
        g
    };
    // A diamond has no cycle.
    let dag = graph(&[
        ("app", "report"),
        ("app", "rules"),
        ("report", "findings"),
        ("rules", "findings"),
    ]);
    assert_eq!(find_cycle(&dag), None);
    // report -> rules -> findings -> report.
    let cyclic = graph(&[
        ("app", "report"),
        ("report", "rules"),
        ("rules", "findings"),
        ("findings", "report"),
    ]);
    assert_eq!(
        find_cycle(&cyclic).unwrap(),
        ["report", "rules", "findings", "report"]
    );
}

#[test]
fn references_are_read_from_uses_paths_macros_and_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |name: &str, text: &str| {
        let p = src.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod a; pub mod b; pub mod c; pub mod d; pub mod e; pub mod f; pub mod g;\n\
         #[cfg(test)] mod t;\n",
    );
    // Grouped use; an expression path; `super::` from the module's own file.
    write(
        "a.rs",
        "use crate::{b::X, c};\nfn f() { crate::d::g(); }\nfn h() { super::e::k(); }\n",
    );
    // Inside a macro call, an attribute, and a submodule climbing with `super::super`.
    write(
        "b/mod.rs",
        "mod inner;\nfn f() { println!(\"{}\", crate::f::x()); }\n\
         #[arg(value_parser = crate::g::parse)]\nstruct S;\n",
    );
    write("b/inner.rs", "fn f() { super::super::c::y(); }\n");
    // Test code does not count: a #[cfg(test)] module, its file, a *_tests.rs file.
    write(
        "c.rs",
        "#[cfg(test)]\nmod tests { use crate::a::X; }\n#[cfg(test)]\nmod more;\n\
         #[cfg(test)]\n#[path = \"c_tests.rs\"]\nmod t2;\n",
    );
    write("c/more.rs", "use crate::a::Y;\n");
    write("c_tests.rs", "use crate::a::Z;\n");
    for m in ["d", "e", "f", "g", "t"] {
        write(&format!("{m}.rs"), "");
    }
    let edges = module_edges(src);
    let of = |m: &str| -> Vec<String> {
        edges
            .get(m)
            .map(|to| to.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(of("a"), ["b", "c", "d", "e"]);
    assert_eq!(of("b"), ["c", "f", "g"]);
    assert!(of("c").is_empty(), "{:?}", of("c"));
    let r = &edges["b"]["c"];
    assert_eq!((r.file.as_str(), r.line), ("b/inner.rs", 1));
    assert_eq!(edges["a"]["d"].line, 2);
}
