//! Where in its file a config key is: a refusal of a value (out of range,
//! naming an unknown provider) points at it as a parse error does, by line
//! and column.

use callai_engine::config::ConfigError;
use std::path::Path;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// `error` with the file, line and column of the value of the key it names
/// (`tenants.acme.allowedProviders[1]`), when `text` holds that key.
pub fn located(error: ConfigError, path: &Path, text: &str) -> ConfigError {
    let ConfigError::Invalid { key, message } = error else {
        return error;
    };
    let Some((line, column)) = position(text, &key) else {
        return ConfigError::Invalid { key, message };
    };
    ConfigError::Invalid {
        message: format!(
            "{message} (at {}, line {line}, column {column})",
            path.display()
        ),
        key,
    }
}

/// [`located`] in the file at `path`, read again (an error's path, not
/// start-up's); `error` as it is when the file cannot be read.
pub fn located_in_file(error: ConfigError, path: &Path) -> ConfigError {
    match std::fs::read_to_string(path) {
        Ok(text) => located(error, path, &text),
        Err(_) => error,
    }
}

/// The line and column (from 1) where `key`'s value starts in `text`.
pub fn position(text: &str, key: &str) -> Option<(usize, usize)> {
    let document = DeTable::parse(text).ok()?;
    let parts: Vec<&str> = key.split('.').collect();
    let start = find_in_table(document.get_ref(), &parts)?;
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    Some((line, column))
}

/// The byte offset of the value at `parts` under `table`. A table's name
/// may hold a dot (`[providers."my.llm"]`), so every split is tried,
/// longest name first.
fn find_in_table(table: &DeTable<'_>, parts: &[&str]) -> Option<usize> {
    (1..=parts.len()).rev().find_map(|n| {
        let name = parts[..n].join(".");
        let (name, index) = match name.strip_suffix(']').and_then(|n| n.rsplit_once('[')) {
            Some((name, index)) => (name.to_owned(), Some(index.parse::<usize>().ok()?)),
            None => (name, None),
        };
        let value = table
            .iter()
            .find(|(k, _)| k.get_ref().as_ref() == name.as_str())
            .map(|(_, v)| v)?;
        let value = match (index, value.get_ref()) {
            (None, _) => value,
            (Some(i), DeValue::Array(items)) => items.get(i)?,
            (Some(_), _) => return None,
        };
        find_in_value(value, &parts[n..])
    })
}

fn find_in_value(value: &Spanned<DeValue<'_>>, rest: &[&str]) -> Option<usize> {
    match (rest, value.get_ref()) {
        ([], _) => Some(value.span().start),
        (_, DeValue::Table(table)) => find_in_table(table, rest),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::position;

    #[test]
    fn keys_are_found_in_sections_inline_tables_arrays_and_quoted_names() {
        let text = "[retry]\nmaxRetryAttempts = 99\n\n[providers.\"my.llm\"]\nkind = \"openai\"\n\
                    [tenants.acme]\ntokenEnv = \"T\"\nallowedProviders = [\"a\", \"nope\"]\n\
                    budget = { requests = -1 }\n";
        assert_eq!(position(text, "retry.maxRetryAttempts"), Some((2, 20)));
        assert_eq!(position(text, "providers.my.llm.kind"), Some((5, 8)));
        assert_eq!(
            position(text, "tenants.acme.allowedProviders[1]"),
            Some((8, 26))
        );
        assert_eq!(
            position(text, "tenants.acme.budget.requests"),
            Some((9, 23))
        );
        assert_eq!(position(text, "retry.backoffBaseMs"), None);
        assert_eq!(position(text, "tenants.acme.allowedProviders[5]"), None);
        assert_eq!(position("not = [toml", "not"), None);
    }
}
