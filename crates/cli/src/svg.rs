//! The comparison as an SVG figure: search time speedups over `list` (grouped bars per engine:
//! point-to-point, collective, all) and, below, the queues each engine allocated.

use crate::compare::Comparison;
use std::fmt::Write;

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 640.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 720.0;
const LEGEND_X: f64 = 740.0;
const SPEEDUP_PANEL: (f64, f64) = (78.0, 330.0);
const QUEUE_PANEL: (f64, f64) = (418.0, 580.0);
const SPEEDUP_COLORS: [&str; 3] = ["#4e79a7", "#f28e2b", "#59a14f"];
const SPEEDUP_LABELS: [&str; 3] = ["point-to-point", "collective", "all"];
const QUEUE_COLORS: [&str; 2] = ["#76b7b2", "#b07aa1"];
const QUEUE_LABELS: [&str; 2] = ["mean over ranks", "max over ranks"];

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round axis top at or above `max` and a tick step giving about five ticks.
fn nice_axis(max: f64) -> (f64, f64) {
    let max = if max > 0.0 { max } else { 1.0 };
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw * 0.999)
        .unwrap_or(10.0 * magnitude);
    ((max / step - 1e-9).ceil() * step, step)
}

fn number(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One panel of grouped bars: `values[engine][series]` (None: no bar), with axes and legend.
struct Panel<'a> {
    top: f64,
    bottom: f64,
    title: &'a str,
    y_label: &'a str,
    labels: &'a [&'a str],
    colors: &'a [&'a str],
    engines: Vec<&'a str>,
    values: Vec<Vec<Option<f64>>>,
    /// A dashed reference line and its legend entry.
    reference: Option<(f64, &'a str)>,
    format: fn(f64) -> String,
}

impl Panel<'_> {
    fn draw(&self, svg: &mut String) {
        let (top, bottom) = (self.top, self.bottom);
        let data_max = self
            .values
            .iter()
            .flatten()
            .flatten()
            .copied()
            .fold(0.0, f64::max);
        let reference = self.reference.map_or(0.0, |(v, _)| v);
        let (axis_max, step) = nice_axis(data_max.max(reference) * 1.08);
        let y = |v: f64| bottom - (bottom - top) * v / axis_max;
        let _ = writeln!(
            svg,
            r#"<text x="{LEFT}" y="{}" font-size="15" font-weight="bold">{}</text>"#,
            top - 14.0,
            escape(self.title)
        );
        // Grid and y ticks, with as many decimals as the step needs.
        let decimals = (0..3)
            .find(|d| (step * 10f64.powi(*d)).fract().abs() < 1e-6)
            .unwrap_or(3) as usize;
        for i in 0..=(axis_max / step).round() as usize {
            let tick = step * i as f64;
            let ty = y(tick);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{ty:.1}" x2="{RIGHT}" y2="{ty:.1}" stroke="#e0e0e0"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{tick:.decimals$}</text>"##,
                LEFT - 6.0,
                ty + 4.0,
            );
        }
        let middle = (top + bottom) / 2.0;
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{middle:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 {} {middle:.1})">{}</text>"#,
            LEFT - 48.0,
            LEFT - 48.0,
            escape(self.y_label)
        );
        // Bars, grouped by engine.
        let group = (RIGHT - LEFT) / self.engines.len().max(1) as f64;
        let bar = group * 0.75 / self.labels.len() as f64;
        for (i, (engine, values)) in self.engines.iter().zip(&self.values).enumerate() {
            let start = LEFT + group * i as f64 + group * 0.125;
            for (j, value) in values.iter().enumerate() {
                let x = start + bar * j as f64;
                let center = x + bar / 2.0;
                match value {
                    Some(v) => {
                        let _ = writeln!(
                            svg,
                            r#"<rect class="bar" x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {} {}</title></rect>"#,
                            y(*v),
                            bar * 0.92,
                            bottom - y(*v),
                            self.colors[j],
                            escape(engine),
                            self.labels[j],
                            (self.format)(*v)
                        );
                        // Narrow bars get their value written upwards.
                        let label_y = y(*v) - 4.0;
                        let rotate = if bar < 24.0 {
                            format!(
                                r#" text-anchor="start" transform="rotate(-90 {center:.1} {label_y:.1})""#
                            )
                        } else {
                            r#" text-anchor="middle""#.to_string()
                        };
                        let _ = writeln!(
                            svg,
                            r#"<text x="{center:.1}" y="{label_y:.1}" font-size="10"{rotate}>{}</text>"#,
                            (self.format)(*v)
                        );
                    }
                    None => {
                        let _ = writeln!(
                            svg,
                            r##"<text x="{center:.1}" y="{:.1}" font-size="9" fill="#888" text-anchor="middle">n/a</text>"##,
                            bottom - 4.0
                        );
                    }
                }
            }
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
                LEFT + group * (i as f64 + 0.5),
                bottom + 18.0,
                escape(engine)
            );
        }
        if let Some((value, _)) = self.reference {
            let ry = y(value);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{ry:.1}" x2="{RIGHT}" y2="{ry:.1}" stroke="#d62728" stroke-dasharray="6 4"/>"##
            );
        }
        // Axes.
        let _ = writeln!(
            svg,
            r##"<path d="M{LEFT} {top} V{bottom} H{RIGHT}" fill="none" stroke="#333"/>"##
        );
        // Legend.
        let mut ly = top + 6.0;
        for (label, color) in self.labels.iter().zip(self.colors) {
            let _ = writeln!(
                svg,
                r#"<rect x="{LEGEND_X}" y="{:.1}" width="12" height="12" fill="{color}"/><text x="{}" y="{ly:.1}" font-size="12">{}</text>"#,
                ly - 10.0,
                LEGEND_X + 18.0,
                escape(label)
            );
            ly += 20.0;
        }
        if let Some((_, label)) = self.reference {
            let _ = writeln!(
                svg,
                r##"<line x1="{LEGEND_X}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#d62728" stroke-dasharray="6 4"/><text x="{}" y="{ly:.1}" font-size="12">{}</text>"##,
                ly - 4.0,
                LEGEND_X + 12.0,
                ly - 4.0,
                LEGEND_X + 18.0,
                escape(label)
            );
        }
    }
}

pub fn plot(c: &Comparison) -> String {
    let engines: Vec<&str> = c.engines.iter().map(|e| e.engine.as_str()).collect();
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="white"/>
"#
    );
    let _ = writeln!(
        svg,
        r##"<text x="{LEFT}" y="26" font-size="13" fill="#444">{}: {} ranks, {}, median of {} run{}; engine time summed over ranks</text>"##,
        escape(&c.program.join(" ")),
        c.ranks,
        escape(&c.mpi),
        c.repeat,
        if c.repeat == 1 { "" } else { "s" }
    );
    Panel {
        top: SPEEDUP_PANEL.0,
        bottom: SPEEDUP_PANEL.1,
        title: "Queue search time speedup over list",
        y_label: "speedup (x)",
        labels: &SPEEDUP_LABELS,
        colors: &SPEEDUP_COLORS,
        engines: engines.clone(),
        values: c.engines.iter().map(|e| e.speedup.to_vec()).collect(),
        reference: Some((1.0, "list = 1")),
        format: number,
    }
    .draw(&mut svg);
    Panel {
        top: QUEUE_PANEL.0,
        bottom: QUEUE_PANEL.1,
        title: "Queues allocated per rank",
        y_label: "queues",
        labels: &QUEUE_LABELS,
        colors: &QUEUE_COLORS,
        engines,
        values: c
            .engines
            .iter()
            .map(|e| vec![Some(e.queues_mean), Some(e.queues_max as f64)])
            .collect(),
        reference: None,
        format: |v| {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        },
    }
    .draw(&mut svg);
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::fixture;

    #[test]
    fn axes_are_round() {
        assert_eq!(nice_axis(1.08), (1.25, 0.25));
        assert_eq!(nice_axis(3.3), (4.0, 1.0));
        assert_eq!(nice_axis(73.0), (80.0, 20.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(nice_axis(12.0), (12.5, 2.5));
    }

    #[test]
    fn the_plot_has_a_bar_per_value_labels_and_legends() {
        let mut c = fixture();
        c.program = vec!["./a&b".into()];
        let svg = plot(&c);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        // 2 engines x 3 speedups + 2 engines x 2 queue counts.
        assert_eq!(svg.matches(r#"class="bar""#).count(), 10);
        for text in [
            "Queue search time speedup over list",
            "Queues allocated per rank",
            ">list<",
            ">rank<",
            ">point-to-point<",
            ">collective<",
            ">all<",
            ">list = 1<",
            ">mean over ranks<",
            ">max over ranks<",
            ">speedup (x)<",
            "./a&amp;b",
            "<title>rank: all 3.03</title>",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert!(!svg.contains("./a&b"));
        for tag in ["text", "title"] {
            assert_eq!(
                svg.matches(&format!("<{tag}")).count(),
                svg.matches(&format!("</{tag}>")).count()
            );
        }
    }

    #[test]
    fn missing_speedups_are_marked_not_drawn() {
        let mut c = fixture();
        c.engines[1].speedup[1] = None;
        let svg = plot(&c);
        assert_eq!(svg.matches(r#"class="bar""#).count(), 9);
        assert_eq!(svg.matches(">n/a<").count(), 1);
    }
}
