//! Plots how cost grows with size from the bench example's JSON lines: one SVG chart of
//! the cost per unit (`per_step_us`: per step, per call, per node) against `n` (a log
//! axis), one line per case. A flat line is linear growth; a rising one, worse.
//!
//! ```sh
//! for n in 1000 10000 100000; do
//!     for c in loop linear subgraph; do cargo run -q --release --example bench -- $c $n; done
//! done > lines.jsonl
//! for n in 10000 100000 1000000; do
//!     for c in build dot; do cargo run -q --release --example bench -- $c $n; done
//! done >> lines.jsonl
//! cargo run --release --example plot_scaling -- docs/images/scaling.svg < lines.jsonl
//! ```
//!
//! Lines other engines' harnesses print in the same format plot beside pactgraph's: an
//! optional `"engine"` field names the series (`"langgraph loop"`); lines without it are
//! pactgraph's. Blank lines are skipped; any other line that is not a bench line is an
//! error naming its number. The same input gives a byte-identical SVG.

use std::io::{BufRead, Read};
use std::process::ExitCode;

use indexmap::IndexMap;
use plotters::prelude::*;
use serde::Deserialize;

/// One line of the bench example's output (fields other engines may add are ignored).
#[derive(Deserialize)]
struct BenchLine {
    bench: String,
    n: f64,
    per_step_us: f64,
    #[serde(default)]
    engine: Option<String>,
}

/// Series in order of first appearance, each a list of (n, µs per unit).
type Series = IndexMap<String, Vec<(f64, f64)>>;

fn read_series(input: impl Read) -> Result<Series, String> {
    let mut series = Series::new();
    for (k, line) in std::io::BufReader::new(input).lines().enumerate() {
        let line = line.map_err(|e| format!("reading line {}: {e}", k + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let b: BenchLine = serde_json::from_str(&line)
            .map_err(|e| format!("line {} is not a bench line: {e}", k + 1))?;
        if !(b.n > 0.0 && b.per_step_us > 0.0 && b.n.is_finite() && b.per_step_us.is_finite()) {
            return Err(format!(
                "line {}: `n` and `per_step_us` must be positive to go on a log scale",
                k + 1
            ));
        }
        let name = match b.engine {
            Some(e) => format!("{e} {}", b.bench),
            None => b.bench,
        };
        series.entry(name).or_default().push((b.n, b.per_step_us));
    }
    for points in series.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    if series.is_empty() {
        return Err("no bench lines on standard input".into());
    }
    Ok(series)
}

/// Okabe-Ito colours (told apart with colour-blindness and on white), then plotters'
/// palette for any further series.
const COLOURS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
];

fn colour(k: usize) -> RGBAColor {
    match COLOURS.get(k) {
        Some(c) => c.to_rgba(),
        None => Palette99::pick(k).to_rgba(),
    }
}

/// The range of `values` with a margin of `pad` times on each side (a log axis).
fn padded(values: impl Iterator<Item = f64>, pad: f64) -> std::ops::Range<f64> {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    lo / pad..hi * pad
}

/// `1000` as `1k`, `1000000` as `1M`.
fn short(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{}M", v / 1e6),
        v if v >= 1e3 => format!("{}k", v / 1e3),
        v => format!("{v}"),
    }
}

fn plot(series: &Series, out: &str) -> Result<(), Box<dyn std::error::Error>> {
    let xs = padded(series.values().flatten().map(|p| p.0), 1.3);
    let top = series.values().flatten().map(|p| p.1).fold(0.0, f64::max);
    let root = SVGBackend::new(out, (760, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "pactgraph: cost per unit as size grows (flat = linear)",
            ("sans-serif", 18),
        )
        .margin(16)
        .margin_right(32)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(xs.log_scale(), 0.0..top * 1.15)?;
    chart
        .configure_mesh()
        .x_desc("n (steps, calls or nodes)")
        .y_desc("µs per step, call or node (median)")
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .draw()?;
    for (k, (name, points)) in series.iter().enumerate() {
        let color = colour(k);
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out] = args.as_slice() else {
        eprintln!("usage: cargo run --example plot_scaling -- OUT.svg < bench-lines.jsonl");
        return ExitCode::from(2);
    };
    let result = read_series(std::io::stdin().lock())
        .and_then(|s| plot(&s, out).map_err(|e| format!("drawing {out}: {e}")));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plot_scaling: {e}");
            ExitCode::from(1)
        }
    }
}
