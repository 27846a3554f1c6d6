//! What checking one reply against a schema can cost, judged from the
//! schema alone, before any reply arrives. A schema is a graph: `$ref`s,
//! and applicators that apply subschemas to the same value (`allOf`,
//! `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas`) or to
//! the value's children (`properties`, `items`, ...). A validator walks
//! that graph without memoising, so a few kilobytes of schema can ask for
//! exponentially many rule applications:
//! - on one value, when same-value edges double at each step
//!   (`d_i = {"allOf": [{"$ref": d_i+1}, {"$ref": d_i+1}]}`), or loop;
//! - down a reply's nesting, when several paths lead to the same child
//!   schema at each level.
//!
//! [`check`] measures both: the same-value expansion of every node, and a
//! walk down `MAX_DEPTH` levels of nesting that follows, at each level, the
//! child key that applies the most rules. Past `limit` rule applications,
//! the schema is refused.
//!
//! The graph must be the one the validator walks, or the judgement is of
//! another schema. So every reference is followed as jsonschema resolves
//! it (a fragment is percent-decoded: `#/%24defs/a` is `#/$defs/a`; a base
//! equal to the root's `$id` is this document), and every form this model
//! cannot follow is refused rather than skipped: a `$ref` to an anchor, to
//! another resource (`urn:`, a relative or absolute URI), or to nothing; a
//! `$dynamicRef` or `$recursiveRef`; and an `$id` below the root, which
//! moves the base its references resolve against.

use serde_json::{Map, Value};
use std::collections::HashMap;

/// The deepest reply nesting judged (serde_json refuses deeper JSON).
const MAX_DEPTH: usize = 128;

/// Keywords whose subschemas apply to the same value.
const SAME_VALUE_ONE: [&str; 4] = ["not", "if", "then", "else"];
const SAME_VALUE_MANY: [&str; 3] = ["allOf", "anyOf", "oneOf"];
/// `dependencies` is draft 7's `dependentSchemas` (its array values name
/// properties and apply no schema; they cost one rule, as a leaf).
const SAME_VALUE_MAP: [&str; 2] = ["dependentSchemas", "dependencies"];
/// References resolved at validation time from the dynamic scope: no
/// static graph has their edges.
const DYNAMIC_REFS: [&str; 2] = ["$dynamicRef", "$recursiveRef"];
/// Keywords whose subschemas apply to any child (any key, any item).
const ANY_CHILD_ONE: [&str; 7] = [
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "items",
];
const ANY_CHILD_MAP: [&str; 1] = ["patternProperties"];
const ANY_CHILD_MANY: [&str; 2] = ["prefixItems", "items"];

/// A schema node: its JSON pointer in the schema document.
type Node = String;

/// One node's edges.
#[derive(Default, Clone)]
struct Edges {
    same_value: Vec<Node>,
    /// Children under a named property.
    by_key: Vec<(String, Node)>,
    /// Children under any key or item.
    any_child: Vec<Node>,
}

struct Graph<'a> {
    root: &'a Value,
    /// The root's `$id`: a reference with this base is to this document.
    base: Option<&'a str>,
    edges: HashMap<Node, Edges>,
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Refuses an `$id` anywhere below the root (and draft 4's `id`, in a
/// document that says it is draft 4): it would move the base URI that the
/// references under it resolve against.
fn no_nested_ids(root: &Value) -> Result<(), String> {
    let draft4 = root
        .get("$schema")
        .and_then(Value::as_str)
        .is_some_and(|s| s.contains("draft-04"));
    fn walk(v: &Value, at: &mut String, draft4: bool, is_root: bool) -> Result<(), String> {
        match v {
            Value::Object(o) => {
                for (k, child) in o {
                    let is_id = k == "$id" || (draft4 && k == "id");
                    if is_id && !is_root && child.is_string() {
                        return Err(format!(
                            "it sets {k:?} at {at:?}, below the root, which moves the base its references resolve against; the cost check follows references within one document: give $id at the root only"
                        ));
                    }
                    let len = at.len();
                    at.push('/');
                    at.push_str(&escape(k));
                    walk(child, at, draft4, false)?;
                    at.truncate(len);
                }
                Ok(())
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let len = at.len();
                    at.push_str(&format!("/{i}"));
                    walk(child, at, draft4, false)?;
                    at.truncate(len);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    walk(root, &mut String::new(), draft4, true)
}

impl<'a> Graph<'a> {
    fn new(root: &'a Value) -> Self {
        Self {
            root,
            base: root.get("$id").and_then(Value::as_str),
            edges: HashMap::new(),
        }
    }

    /// The node `$ref` points to, as jsonschema resolves it: a JSON pointer
    /// in this document, its fragment percent-decoded. Anything else is
    /// refused, naming it.
    fn resolve(&self, reference: &str) -> Result<Node, String> {
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        if !base.is_empty() && Some(base) != self.base.map(|b| b.trim_end_matches('#')) {
            return Err(format!(
                "its $ref {reference:?} names another resource, which the cost check cannot follow; use a JSON pointer in this schema (\"#/$defs/...\")"
            ));
        }
        let pointer = percent_encoding::percent_decode_str(fragment)
            .decode_utf8()
            .map_err(|_| format!("its $ref {reference:?} is not UTF-8 once decoded"))?;
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(format!(
                "its $ref {reference:?} names an anchor, which the cost check cannot follow; use a JSON pointer (\"#/$defs/...\")"
            ));
        }
        match self.root.pointer(&pointer) {
            Some(_) => Ok(pointer.into_owned()),
            None => Err(format!(
                "its $ref {reference:?} points at nothing in the schema"
            )),
        }
    }

    /// The edges of `node`, read once.
    fn edges(&mut self, node: &str) -> Result<&Edges, String> {
        if !self.edges.contains_key(node) {
            let edges = match self.root.pointer(node) {
                Some(Value::Object(o)) => self.read(node, o)?,
                _ => Edges::default(),
            };
            self.edges.insert(node.to_owned(), edges);
        }
        Ok(&self.edges[node])
    }

    fn read(&self, node: &str, o: &Map<String, Value>) -> Result<Edges, String> {
        let mut e = Edges::default();
        let at = |k: &str| format!("{node}/{}", escape(k));
        let all = |k: &str, v: &Value| match v {
            Value::Array(items) => (0..items.len()).map(|i| format!("{}/{i}", at(k))).collect(),
            _ => Vec::new(),
        };
        let map = |k: &str, v: &Value| match v {
            Value::Object(m) => m
                .keys()
                .map(|name| (name.clone(), format!("{}/{}", at(k), escape(name))))
                .collect(),
            _ => Vec::new(),
        };
        for (k, v) in o {
            let k = k.as_str();
            if k == "$ref" {
                if let Some(reference) = v.as_str() {
                    e.same_value.push(self.resolve(reference)?);
                }
            } else if DYNAMIC_REFS.contains(&k) {
                return Err(format!(
                    "it uses {k} (at {node:?}), resolved from the dynamic scope, which the cost check cannot follow; use $ref with a JSON pointer"
                ));
            } else if SAME_VALUE_ONE.contains(&k) {
                e.same_value.push(at(k));
            } else if SAME_VALUE_MANY.contains(&k) {
                e.same_value.extend(all(k, v));
            } else if SAME_VALUE_MAP.contains(&k) {
                e.same_value.extend(map(k, v).into_iter().map(|(_, n)| n));
            } else if k == "properties" {
                e.by_key.extend(map(k, v));
            } else if ANY_CHILD_MAP.contains(&k) {
                e.any_child.extend(map(k, v).into_iter().map(|(_, n)| n));
            } else if ANY_CHILD_MANY.contains(&k) && v.is_array() {
                e.any_child.extend(all(k, v));
            } else if ANY_CHILD_ONE.contains(&k) {
                e.any_child.push(at(k));
            }
        }
        Ok(e)
    }
}

/// Rule applications of `node` on one value: itself and, recursively, what
/// it applies to the same value. A same-value loop never ends.
fn expansion(
    g: &mut Graph<'_>,
    node: &str,
    memo: &mut HashMap<Node, u64>,
    path: &mut Vec<Node>,
) -> Result<u64, String> {
    if let Some(&n) = memo.get(node) {
        return Ok(n);
    }
    if path.iter().any(|p| p == node) {
        return Err(format!(
            "it applies {node:?} to a value through itself without descending into the value, which never ends"
        ));
    }
    path.push(node.to_owned());
    let children = g.edges(node)?.same_value.clone();
    let mut total: u64 = 1;
    for child in children {
        total = total.saturating_add(expansion(g, &child, memo, path)?);
    }
    path.pop();
    memo.insert(node.to_owned(), total);
    Ok(total)
}

/// The nodes `node` applies to one value, itself included, with how many
/// times each is reached.
fn same_value_closure(
    g: &mut Graph<'_>,
    node: &str,
    out: &mut HashMap<Node, u64>,
    times: u64,
) -> Result<(), String> {
    *out.entry(node.to_owned()).or_insert(0) += times;
    let children = g.edges(node)?.same_value.clone();
    for child in children {
        same_value_closure(g, &child, out, times)?;
    }
    Ok(())
}

/// `Ok` when checking any reply against `schema` stays within `limit` rule
/// applications in all, with the most one level of nesting applies (what a
/// reply costs per value, at most); else why not.
pub fn check(schema: &Value, limit: u64) -> Result<u64, String> {
    no_nested_ids(schema)?;
    let mut g = Graph::new(schema);
    let mut memo = HashMap::new();
    let root_cost = expansion(&mut g, "", &mut memo, &mut Vec::new())?;
    if root_cost > limit {
        return Err(format!(
            "checking one value against it applies {root_cost} rules, over limits.maxSchemaWork ({limit})"
        ));
    }
    // Down the nesting: the schema nodes applied at each level, with their
    // multiplicity, following the child key that applies the most.
    let mut level: HashMap<Node, u64> = HashMap::from([(String::new(), 1)]);
    let (mut total, mut heaviest_level) = (0u64, root_cost);
    for depth in 0..MAX_DEPTH {
        let mut applied = HashMap::new();
        for (node, times) in &level {
            same_value_closure(&mut g, node, &mut applied, *times)?;
            if applied.len() > 100_000 {
                return Err("it applies too many distinct rules to one value".into());
            }
        }
        let mut this_level: u64 = 0;
        for (node, times) in &applied {
            let cost = expansion(&mut g, node, &mut memo, &mut Vec::new())?;
            this_level = this_level.saturating_add(times.saturating_mul(cost));
        }
        total = total.saturating_add(this_level);
        heaviest_level = heaviest_level.max(this_level);
        if total > limit {
            return Err(format!(
                "checking a reply nested {depth} levels deep can apply over {limit} rules (limits.maxSchemaWork)"
            ));
        }
        let mut by_key: HashMap<&str, HashMap<Node, u64>> = HashMap::new();
        let mut any: HashMap<Node, u64> = HashMap::new();
        let mut edges: Vec<(Edges, u64)> = Vec::with_capacity(applied.len());
        for (node, times) in &applied {
            edges.push((g.edges(node)?.clone(), *times));
        }
        for (e, times) in &edges {
            for (key, child) in &e.by_key {
                *by_key
                    .entry(key)
                    .or_default()
                    .entry(child.clone())
                    .or_insert(0) += times;
            }
            for child in &e.any_child {
                *any.entry(child.clone()).or_insert(0) += times;
            }
        }
        // A named key gets its own children and every any-key child.
        let weight = |m: &HashMap<Node, u64>| m.values().fold(0u64, |a, b| a.saturating_add(*b));
        let mut next = any.clone();
        let mut heaviest = weight(&any);
        for children in by_key.values() {
            let mut merged = any.clone();
            for (child, times) in children {
                *merged.entry(child.clone()).or_insert(0) += times;
            }
            if weight(&merged) > heaviest {
                heaviest = weight(&merged);
                next = merged;
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Ok(heaviest_level)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `d_i = {"allOf": [{"$ref": d_i+1}, {"$ref": d_i+1}]}`, `depth` levels.
    fn doubling(depth: usize) -> Value {
        let mut defs = Map::new();
        for i in 0..depth {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({"allOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert(format!("d{depth}"), json!({"type": "object"}));
        json!({"$defs": defs, "$ref": "#/$defs/d0"})
    }

    #[test]
    fn ordinary_schemas_pass() {
        for schema in [
            json!({"type": "object", "required": ["scene"], "properties": {"scene": {"type": "string"}}}),
            json!(true),
            json!({"anyOf": [{"type": "string"}, {"type": "number"}], "items": {"type": "object"}}),
            // A recursive tree: one path per child, however deep.
            json!({"$defs": {"node": {"type": "object", "properties": {
                "left": {"$ref": "#/$defs/node"}, "right": {"$ref": "#/$defs/node"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
                "$ref": "#/$defs/node"}),
            doubling(10),
        ] {
            assert!(check(&schema, 1_000_000).is_ok(), "{schema}");
        }
    }

    #[test]
    fn doubling_on_one_value_is_refused() {
        let err = check(&doubling(31), 1_000_000).unwrap_err();
        assert!(err.contains("maxSchemaWork"), "{err}");
    }

    #[test]
    fn a_same_value_loop_is_refused() {
        for schema in [
            json!({"$ref": "#"}),
            json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"not": {"$ref": "#/$defs/a"}}},
                   "$ref": "#/$defs/a"}),
        ] {
            let err = check(&schema, 1_000_000).unwrap_err();
            assert!(err.contains("never ends"), "{err}");
        }
    }

    #[test]
    fn doubling_down_the_nesting_is_refused() {
        // Two branches that both descend into the same child: 2^depth paths.
        let schema = json!({"$defs": {"n": {"anyOf": [
            {"properties": {"a": {"$ref": "#/$defs/n"}}},
            {"properties": {"a": {"$ref": "#/$defs/n"}}}]}},
            "$ref": "#/$defs/n"});
        let err = check(&schema, 1_000_000).unwrap_err();
        assert!(err.contains("nested"), "{err}");
    }
}
