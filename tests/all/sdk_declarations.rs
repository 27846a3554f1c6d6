//! The TypeScript SDK's declarations of the `openwop:callai` imports
//! (`guest-sdk-ts/src/wit.d.ts`, written by hand) against the WIT they
//! declare: every declared function, record field and enum case must be
//! the WIT's, in componentize-js's spelling (camelCase names, kebab-case
//! enum strings).

use std::collections::BTreeSet;
use wit_parser::{Resolve, TypeDefKind};

fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The text of `declare module '<name>' { ... }`.
fn module<'a>(d_ts: &'a str, name: &str) -> &'a str {
    let start = d_ts
        .find(&format!("declare module '{name}'"))
        .unwrap_or_else(|| panic!("wit.d.ts declares no module {name}"));
    let rest = &d_ts[start..];
    &rest[..rest.find("\n}").unwrap()]
}

#[test]
fn the_typescript_declarations_match_the_wit() {
    let d_ts = include_str!("../../guest-sdk-ts/src/wit.d.ts");
    let mut resolve = Resolve::default();
    let pkg = resolve
        .push_str("callai.wit", include_str!("../../wit/callai.wit"))
        .unwrap();
    let version = resolve.packages[pkg].name.version.clone().unwrap();
    let mut checked = BTreeSet::new();
    for (_, iface) in resolve.interfaces.iter() {
        let name = iface.name.clone().unwrap();
        let module_name = format!("openwop:callai/{name}@{version}");
        let Some(start) = d_ts.find(&format!("declare module '{module_name}'")) else {
            continue;
        };
        let text = module(&d_ts[start..], &module_name);
        // Declared functions are the WIT's.
        for line in text.lines().filter(|l| l.contains("export function ")) {
            let declared = line
                .split("export function ")
                .nth(1)
                .unwrap()
                .split('(')
                .next()
                .unwrap();
            let found = iface.functions.keys().any(|f| camel(f) == declared);
            assert!(
                found,
                "{module_name}: {declared} is not a function of the WIT"
            );
            checked.insert(format!("{name}.{declared}"));
        }
        for (type_name, id) in &iface.types {
            let ts_name = camel(&format!("-{type_name}"));
            let Some(at) = text.find(&format!(" {ts_name} ")) else {
                continue;
            };
            let rest = &text[at..];
            // A type alias ends at its `;`, an interface at its `}`.
            let end = |c: char| rest.find(c).unwrap_or(rest.len());
            match &resolve.types[*id].kind {
                TypeDefKind::Enum(e) => {
                    let decl = &rest[..end(';')];
                    for case in &e.cases {
                        assert!(
                            decl.contains(&format!("'{}'", case.name)),
                            "{ts_name} lacks '{}'",
                            case.name
                        );
                    }
                    let declared = decl.matches('\'').count() / 2;
                    assert_eq!(declared, e.cases.len(), "{ts_name}: cases");
                }
                TypeDefKind::Record(r) => {
                    let decl = &rest[..end('}')];
                    for field in &r.fields {
                        let f = camel(&field.name);
                        assert!(
                            decl.contains(&format!("{f}:")) || decl.contains(&format!("{f}?:")),
                            "{ts_name} lacks {f}"
                        );
                    }
                }
                _ => {}
            }
            checked.insert(format!("{name}.{ts_name}"));
        }
        // The log level is an enum of the `log` interface.
        if name == "log" {
            let level = resolve
                .types
                .iter()
                .find(|(_, t)| t.name.as_deref() == Some("level"))
                .unwrap()
                .1;
            if let TypeDefKind::Enum(e) = &level.kind {
                for case in &e.cases {
                    assert!(
                        text.contains(&format!("'{}'", case.name)),
                        "Level lacks {}",
                        case.name
                    );
                }
            }
        }
    }
    for needed in [
        "ai.callAiJson",
        "ai.callAccounting",
        "log.log",
        "types.ErrorCode",
        "types.CallError",
        "types.AccountingFlags",
    ] {
        assert!(
            checked.contains(needed),
            "{needed} was not checked: {checked:?}"
        );
    }
}
