//! CEL evaluation of rule conditions and evidence over [`Facts`].
//!
//! Each fact group (`host`, `sched`, ...) is bound as one CEL map variable, so
//! expressions read `sched.runq_p99_us`. Compiling happens once per rule when
//! rules are loaded ([`compile`]); evaluating is cheap and happens per
//! recording. Errors are turned into plain sentences ("no fact named
//! `runq_p98_us`") because they end up in front of rule authors and SREs.

use cel::{Context, ExecutionError, Program};

use super::facts::{FactValue, Facts};
use crate::findings::EvidenceValue;

/// Why an expression could not be compiled or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    #[error("CEL syntax error: {0}")]
    Syntax(String),
    #[error("unknown name or function `{0}`")]
    UnknownName(String),
    #[error("no fact named `{0}`")]
    NoSuchFact(String),
    #[error("{0}")]
    Execution(String),
    #[error("must be true or false, but gave {0}")]
    NotBool(String),
    #[error("must give a number, text or true/false, but gave {0}")]
    NotScalar(String),
}

impl From<ExecutionError> for EvalError {
    fn from(e: ExecutionError) -> Self {
        match e {
            ExecutionError::UndeclaredReference(name) => EvalError::UnknownName(name.to_string()),
            ExecutionError::NoSuchKey(key) => EvalError::NoSuchFact(key.to_string()),
            other => EvalError::Execution(other.to_string()),
        }
    }
}

/// Every `name.field` selection in `program` whose operand is a plain
/// identifier (e.g. `("sched", "runq_p99_us")`), in source order. Presence
/// tests (`has(sched.x)`) are left out: testing for a missing field is their
/// point. Used to check fact names statically, including in branches that a
/// trial evaluation would skip (`false && sched.typo > 1`).
pub fn selections(program: &Program) -> Vec<(String, String)> {
    let mut out = Vec::new();
    walk(program.expression(), &mut out);
    out
}

fn walk(e: &cel::IdedExpr, out: &mut Vec<(String, String)>) {
    use cel::common::ast::{EntryExpr, Expr};
    match &e.expr {
        Expr::Select(sel) => {
            if let Expr::Ident(name) = &sel.operand.expr {
                if !sel.test {
                    out.push((name.clone(), sel.field.clone()));
                }
            } else {
                walk(&sel.operand, out);
            }
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                walk(target, out);
            }
            for arg in &call.args {
                walk(arg, out);
            }
        }
        Expr::Comprehension(c) => {
            for part in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk(part, out);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(|el| walk(el, out)),
        Expr::Map(map) => {
            for entry in &map.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(m) => {
                        walk(&m.key, out);
                        walk(&m.value, out);
                    }
                    EntryExpr::StructField(f) => walk(&f.value, out),
                }
            }
        }
        Expr::Struct(st) => {
            for entry in &st.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(m) => {
                        walk(&m.key, out);
                        walk(&m.value, out);
                    }
                    EntryExpr::StructField(f) => walk(&f.value, out),
                }
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Compiles one CEL expression.
pub fn compile(source: &str) -> Result<Program, EvalError> {
    Program::compile(source).map_err(|e| EvalError::Syntax(e.to_string().trim().to_string()))
}

/// A CEL context binding the fact groups of `facts`. With `only`, just those
/// groups are bound (used to check that a rule lists what it reads in `requires`).
pub fn context(facts: &Facts, only: Option<&[&str]>) -> Context<'static, 'static> {
    let mut ctx = Context::default();
    for (name, group) in facts.groups() {
        if only.is_some_and(|only| !only.contains(&name.as_str())) {
            continue;
        }
        ctx.add_variable_from_value(name.clone(), super::facts::map_to_cel(group));
    }
    // Groups not recorded are empty maps, so that a rule's `has(group.fact)`
    // on an optional group is false rather than an error.
    for name in super::facts::FACT_GROUPS.iter() {
        if facts.group(name).is_none() && only.is_none_or(|only| only.contains(name)) {
            ctx.add_variable_from_value(
                (*name).to_string(),
                super::facts::map_to_cel(&super::facts::FactGroup::new()),
            );
        }
    }
    ctx
}

/// Evaluates a condition; it must give a bool.
pub fn eval_bool(program: &Program, ctx: &Context<'_, '_>) -> Result<bool, EvalError> {
    match program.execute(ctx)? {
        cel::Value::Bool(b) => Ok(b),
        other => Err(EvalError::NotBool(describe(&other))),
    }
}

/// Evaluates an evidence expression; it must give a scalar.
pub fn eval_scalar(program: &Program, ctx: &Context<'_, '_>) -> Result<EvidenceValue, EvalError> {
    let value = program.execute(ctx)?;
    match value {
        cel::Value::Bool(b) => Ok(EvidenceValue::Bool(b)),
        cel::Value::Int(i) => Ok(EvidenceValue::Int(i)),
        cel::Value::UInt(u) => Ok(EvidenceValue::Int(i64::try_from(u).unwrap_or(i64::MAX))),
        cel::Value::Float(f) => Ok(EvidenceValue::Float(f)),
        cel::Value::String(s) => Ok(EvidenceValue::Text(s.to_string())),
        cel::Value::Null => Ok(EvidenceValue::Null),
        other => Err(EvalError::NotScalar(describe(&other))),
    }
}

/// "a map", "the number 3", ... for error messages.
fn describe(v: &cel::Value) -> String {
    match v {
        cel::Value::Int(i) => format!("the number {i}"),
        cel::Value::UInt(u) => format!("the number {u}"),
        cel::Value::Float(f) => format!("the number {f}"),
        cel::Value::String(s) => format!("the text {s:?}"),
        cel::Value::Bool(b) => format!("{b}"),
        cel::Value::Null => "null".into(),
        other => format!("a value of type {}", other.type_of()),
    }
}

impl From<&FactValue> for EvidenceValue {
    fn from(v: &FactValue) -> Self {
        match v {
            FactValue::Bool(b) => EvidenceValue::Bool(*b),
            FactValue::Int(i) => EvidenceValue::Int(*i),
            FactValue::Float(f) => EvidenceValue::Float(*f),
            FactValue::Text(s) => EvidenceValue::Text(s.clone()),
            FactValue::Map(_) => EvidenceValue::Text("(map)".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testdata;

    fn run(expr: &str) -> Result<bool, EvalError> {
        let facts = Facts::derive(&testdata::oversubscribed());
        let ctx = context(&facts, None);
        eval_bool(&compile(expr)?, &ctx)
    }

    #[test]
    fn conditions_read_nested_facts() {
        assert_eq!(
            run("sched.involuntary_share >= 0.25 && sched.runq_p99_us >= 1000.0"),
            Ok(true)
        );
        assert_eq!(run("sched.involuntary_share < 0.25"), Ok(false));
        // Ints and floats compare with each other.
        assert_eq!(
            run("sched.involuntary >= 100 && sched.runq_p99_us > 1000"),
            Ok(true)
        );
        assert_eq!(run("host.arch == 'x86_64' && host.eevdf"), Ok(true));
        assert_eq!(run("sched.classes['conn'].threads == 4"), Ok(true));
        assert_eq!(run("has(sched.classes.ftdc)"), Ok(false));
    }

    #[test]
    fn errors_are_plain_sentences() {
        assert_eq!(
            run("sched.runq_p98_us > 1.0"),
            Err(EvalError::NoSuchFact("runq_p98_us".into()))
        );
        assert_eq!(
            run("wiredtiger.cache > 1"),
            Err(EvalError::UnknownName("wiredtiger".into()))
        );
        assert!(matches!(run("sched.threads"), Err(EvalError::NotBool(s)) if s == "the number 4"));
        assert!(matches!(run("sched.threads >"), Err(EvalError::Syntax(_))));
    }

    #[test]
    fn only_binds_the_listed_groups() {
        let facts = Facts::derive(&testdata::oversubscribed());
        let ctx = context(&facts, Some(&["host"]));
        let p = compile("sched.threads > 0").unwrap();
        assert_eq!(
            eval_bool(&p, &ctx),
            Err(EvalError::UnknownName("sched".into()))
        );
        let p = compile("host.cpu_count == 2").unwrap();
        assert_eq!(eval_bool(&p, &ctx), Ok(true));
    }

    #[test]
    fn selections_find_fact_reads_in_every_branch() {
        let p = compile(
            "false && sched.runq_p98_us > 1.0 || has(sched.maybe) \
             || [1].exists(x, host.cpu_count > x) || sched.classes['conn'].threads > 0",
        )
        .unwrap();
        let found = selections(&p);
        let pairs: Vec<(&str, &str)> = found
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("sched", "runq_p98_us"),
                ("host", "cpu_count"),
                ("sched", "classes")
            ]
        );
    }

    #[test]
    fn evidence_gives_scalars() {
        let facts = Facts::derive(&testdata::oversubscribed());
        let ctx = context(&facts, None);
        let v = |e: &str| eval_scalar(&compile(e).unwrap(), &ctx);
        assert_eq!(v("sched.threads"), Ok(EvidenceValue::Int(4)));
        assert_eq!(v("host.eevdf"), Ok(EvidenceValue::Bool(true)));
        assert_eq!(v("target.comm"), Ok(EvidenceValue::Text("mongod".into())));
        assert!(
            matches!(v("sched.involuntary_share * 100.0"), Ok(EvidenceValue::Float(f)) if (f - 90.2777).abs() < 1e-3)
        );
        assert!(matches!(v("sched.classes"), Err(EvalError::NotScalar(_))));
    }
}
