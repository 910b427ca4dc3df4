//! "Did you mean" messages for unknown names: the closest valid name by
//! edit distance, and the valid ones.

/// `Unknown resource ID 'x'; did you mean 'y'? Valid: 'a', 'b'`.
pub(crate) fn unknown_name(what: &str, asked: &str, valid: &[&str]) -> String {
    let shown: String = asked.chars().take(200).collect();
    format!("Unknown {what} '{shown}'{}", valid_list(asked, valid))
}

/// `; did you mean 'y'? Valid: 'a', 'b'` (at most 20 listed), or nothing
/// when nothing is valid.
pub(crate) fn valid_list(asked: &str, valid: &[&str]) -> String {
    if valid.is_empty() {
        return String::new();
    }
    let closest = valid
        .iter()
        .map(|v| (edit_distance(asked, v), *v))
        .filter(|(d, v)| *d <= (v.chars().count().max(asked.chars().count()) / 3).max(2))
        .min();
    let listed: Vec<String> = valid.iter().take(20).map(|v| format!("'{v}'")).collect();
    let more = if valid.len() > 20 {
        format!(" and {} more", valid.len() - 20)
    } else {
        String::new()
    };
    match closest {
        Some((_, v)) => format!("; did you mean '{v}'? Valid: {}{more}", listed.join(", ")),
        None => format!("; valid: {}{more}", listed.join(", ")),
    }
}

/// Levenshtein distance over chars (short names only).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().take(256).collect();
    let b: Vec<char> = b.chars().take(256).collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
