//! WiredTiger configuration strings (`storage.wiredTiger.engineConfig.configString`):
//! mongod passes one string to `wiredtiger_open`, so two rules that each
//! add settings to it must end up in one combined setting, together with
//! what the server already had. Pasting one rule's string after another's
//! would silently drop the first.
//!
//! The syntax is WiredTiger's: comma-separated `key=value` items, where a
//! value may be a parenthesised list of items (`eviction=(threads_min=4)`)
//! or a quoted string. Merging is by key at the top level and inside
//! parenthesised values, later settings winning.

/// One `key=value` item; `value` is `None` for a bare key.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Plain(String),
    Nested(Vec<(String, Option<Value>)>),
}

/// Splits `s` at top-level commas (outside parentheses and quotes).
fn split_items(s: &str) -> Vec<&str> {
    let (mut depth, mut quoted, mut start) = (0i32, false, 0);
    let mut out = Vec::new();
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '(' | '[' if !quoted => depth += 1,
            ')' | ']' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .collect()
}

fn parse(s: &str) -> Vec<(String, Option<Value>)> {
    split_items(s)
        .into_iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) => {
                let v = v.trim();
                let value = match v.strip_prefix('(').and_then(|x| x.strip_suffix(')')) {
                    Some(inner) => Value::Nested(parse(inner)),
                    None => Value::Plain(v.to_owned()),
                };
                (k.trim().to_owned(), Some(value))
            }
            None => (item.to_owned(), None),
        })
        .collect()
}

fn render(items: &[(String, Option<Value>)]) -> String {
    items
        .iter()
        .map(|(k, v)| match v {
            None => k.clone(),
            Some(Value::Plain(p)) => format!("{k}={p}"),
            Some(Value::Nested(n)) => format!("{k}=({})", render(n)),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn merge_into(base: &mut Vec<(String, Option<Value>)>, add: Vec<(String, Option<Value>)>) {
    for (k, v) in add {
        match base.iter_mut().find(|(bk, _)| *bk == k) {
            Some((_, Some(Value::Nested(old)))) if matches!(v, Some(Value::Nested(_))) => {
                if let Some(Value::Nested(new)) = v {
                    merge_into(old, new);
                }
            }
            Some(slot) => slot.1 = v,
            None => base.push((k, v)),
        }
    }
}

/// `base` with every string of `additions` merged in, in order (later wins).
pub fn merge(base: &str, additions: &[&str]) -> String {
    let mut items = parse(base);
    for a in additions {
        merge_into(&mut items, parse(a));
    }
    render(&items)
}

/// The value of `key` (`eviction.threads_max` reaches inside parentheses).
pub fn get(config: &str, key: &str) -> Option<String> {
    let mut items = parse(config);
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        let (_, v) = items.into_iter().find(|(k, _)| k == part)?;
        match (v?, parts.peek()) {
            (Value::Plain(p), None) => return Some(p),
            (Value::Nested(n), Some(_)) => items = n,
            (Value::Nested(n), None) => return Some(format!("({})", render(&n))),
            (Value::Plain(_), Some(_)) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_by_key_inside_parentheses_and_keeps_the_rest() {
        assert_eq!(
            merge(
                "eviction_target=80,eviction=(threads_min=2),log=(enabled=true)",
                &["eviction=(threads_min=4,threads_max=8)"]
            ),
            "eviction_target=80,eviction=(threads_min=4,threads_max=8),log=(enabled=true)"
        );
        assert_eq!(
            merge(
                "",
                &[
                    "eviction=(threads_min=4,threads_max=8)",
                    "hash=(buckets=2048,dhandle_buckets=2048)"
                ]
            ),
            "eviction=(threads_min=4,threads_max=8),hash=(buckets=2048,dhandle_buckets=2048)"
        );
        // Quoted values keep their commas.
        assert_eq!(
            merge("extensions=[\"a,b\"],x=1", &["x=2"]),
            "extensions=[\"a,b\"],x=2"
        );
        // Idempotent.
        let once = merge("a=1", &["eviction=(threads_max=8)"]);
        assert_eq!(merge(&once, &["eviction=(threads_max=8)"]), once);
    }

    #[test]
    fn reads_nested_values() {
        let c = "eviction=(threads_min=4,threads_max=8),cache_size=1G";
        assert_eq!(get(c, "eviction.threads_max").as_deref(), Some("8"));
        assert_eq!(get(c, "cache_size").as_deref(), Some("1G"));
        assert_eq!(
            get(c, "eviction").as_deref(),
            Some("(threads_min=4,threads_max=8)")
        );
        assert_eq!(get(c, "hash.buckets"), None);
        assert_eq!(get("", "eviction.threads_min"), None);
    }
}
