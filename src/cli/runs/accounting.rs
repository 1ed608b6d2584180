//! The accounting table of `pactgraph runs show`.

use crate::runtime::{Accounting, COST_USD, INPUT_TOKENS, OUTPUT_TOKENS, Usage, WALL_MS};
use comfy_table::{Table, presets};

/// The usage names shown first, in this order; any other name follows, sorted.
const KNOWN: [&str; 4] = [INPUT_TOKENS, OUTPUT_TOKENS, COST_USD, WALL_MS];

/// One row per sum: the total, then each node, subgraph and owner (each sorted by id);
/// one column per usage name (known names first). An amount never reported is `-`.
pub fn accounting_table(acct: &Accounting) -> Table {
    let mut names: Vec<&str> = KNOWN
        .iter()
        .copied()
        .filter(|k| acct.total.get(k).is_some())
        .collect();
    let mut others: Vec<&str> = acct
        .total
        .iter()
        .map(|(n, _)| n)
        .filter(|n| !KNOWN.contains(n))
        .collect();
    others.sort_unstable();
    names.extend(others);
    let mut table = Table::new();
    let mut head = vec!["SUM".to_string(), "OF".to_string()];
    head.extend(names.iter().map(|n| n.to_uppercase()));
    table.load_preset(presets::NOTHING).set_header(head);
    let row = |group: &str, id: &str, usage: &Usage| {
        let mut cells = vec![group.to_string(), id.to_string()];
        cells.extend(
            names
                .iter()
                .map(|n| usage.get(n).map_or_else(|| "-".into(), ToString::to_string)),
        );
        cells
    };
    table.add_row(row("total", "-", &acct.total));
    for (group, map) in [
        ("node", &acct.by_node),
        ("subgraph", &acct.by_subgraph),
        ("owner", &acct.by_owner),
    ] {
        for (id, usage) in map {
            table.add_row(row(group, id, usage));
        }
    }
    table
}
