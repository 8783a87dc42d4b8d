//! `privfed plot` and `privfed analyze epsilon-vs-noise` through the real binary.

use crate::common::{TempDir, fail_line, fail_lines, ok_line, path, run_line};
use std::path::{Path, PathBuf};

fn series_names(svg: &str) -> Vec<String> {
    svg.split(r#"<g class="series" data-series=""#)
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_string())
        .collect()
}

#[test]
fn epsilon_vs_noise_writes_a_csv_that_plots() {
    let dir = TempDir::new("plot-eps");
    let csv = dir.0.join("eps.csv");
    let svg = dir.0.join("eps.svg");
    let vars = [
        ("csv", path(&csv)),
        ("svg", path(&svg)),
        ("title", "ε vs σ"),
    ];
    let v = run_line(
        "analyze epsilon-vs-noise --sigmas 1,2,4 --scale 10 --clients 100 --out {csv} --json",
        &vars,
    );
    assert_eq!(v["analysis"], "epsilon_vs_noise");
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 3 * 7);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("scale,clients,steps,delta,sigma,method,epsilon\n"));
    assert_eq!(text.lines().count(), 1 + 3 * 7);
    // ε falls with σ for the Skellam bound.
    let eps = |sigma: f64| {
        points
            .iter()
            .find(|p| p["method"] == "skellam_rdp_bound" && p["sigma"] == sigma)
            .unwrap()["epsilon"]
            .as_f64()
            .unwrap()
    };
    assert!(eps(1.0) > eps(2.0) && eps(2.0) > eps(4.0));

    ok_line(
        "plot {csv} --x sigma --y epsilon --series method --log-x --log-y --title {title} \
         --out {svg}",
        &vars,
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    let names = series_names(&svg);
    assert_eq!(names.len(), 7);
    assert!(names.contains(&"skellam_pld".to_string()) && names.contains(&"ddg_rdp".to_string()));
    assert!(svg.contains("ε vs σ"));
}

const DME: &str = "\
mechanism,clients,bits,epsilon_target,mse,lo,hi,note
gaussian,100,,1,0.1,0.09,0.11,
skellam,100,10,1,0.2,0.18,0.22,
skellam,100,12,1,0.15,0.14,0.16,
skellam,100,14,1,,,,\"infeasible, use more bits\"
skellam,100,12,6,0.01,0.009,0.011,
gaussian,1000,,1,0.001,0.0009,0.0011,
skellam,1000,10,1,0.02,0.018,0.022,
skellam,1000,12,1,0.002,0.0018,0.0022,
";

/// A fresh temp dir (tagged `tag`) holding [`DME`] as `dme.csv`, and that file's path.
fn dme_csv(tag: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(tag);
    let csv = dir.0.join("dme.csv");
    std::fs::write(&csv, DME).unwrap();
    (dir, csv)
}

#[test]
fn plot_draws_panels_filters_and_reference_levels() {
    let (dir, csv) = dme_csv("plot-dme");
    let svg = dir.0.join("dme.svg");
    let out = ok_line(
        "plot {csv} --x bits --y mse --interval lo,hi --series mechanism --panel clients \
         --where epsilon_target=1|2 --log-y --errors bars --out {svg}",
        &[("csv", path(&csv)), ("svg", path(&svg))],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 panels, 4 series"));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(
        series_names(&svg),
        ["gaussian", "skellam", "gaussian", "skellam"]
    );
    assert!(svg.contains("clients = 100") && svg.contains("clients = 1000"));
    // Two points per skellam series (the infeasible row and ε = 6 are left out): 2 + 2 bars.
    assert_eq!(svg.matches(r#"class="bar""#).count(), 4);
}

#[test]
fn plot_errors_are_clear() {
    let (dir, csv) = dme_csv("plot-bad");
    let nan = dir.0.join("nan.csv");
    std::fs::write(&nan, "x,y\n1,0.5\n2,NaN\n").unwrap();
    let out = dir.0.join("x.svg");
    let missing = dir.0.join("missing.csv");
    fail_lines(
        &[
            ("c", path(&csv)),
            ("n", path(&nan)),
            ("m", path(&missing)),
            ("o", path(&out)),
        ],
        &[
            ("plot {c} --x bitz --y mse --out {o}", "no column \"bitz\""),
            ("plot {c} --x bits --y note --out {o}", "is not a number"),
            (
                "plot {c} --x bits --y mse --where nope --out {o}",
                "--where takes COLUMN=VALUE",
            ),
            (
                "plot {c} --x bits --y mse --size 10 --out {o}",
                "--size takes WIDTHxHEIGHT",
            ),
            (
                "plot {c} --x bits --y mse --series mechanism --size 50x50 --where clients=100 --out {o}",
                "panel size",
            ),
            // Two Gaussian rows without x in one panel cannot be one reference line.
            (
                "plot {c} --x bits --y mse --series mechanism --out {o}",
                "single reference row",
            ),
            ("plot {n} --x x --y y --out {o}", "must be finite"),
            ("plot {m} --x x --y y --out {o}", "reading"),
            (
                "analyze epsilon-vs-noise --sigmas 0",
                "must be finite and > 0",
            ),
        ],
    );
    assert!(!out.exists());
}

/// Width and height from a PNG's IHDR chunk (after the 8-byte signature and the chunk header).
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

#[test]
fn plot_writes_png_of_the_svg_size_times_the_scale() {
    let (dir, csv) = dme_csv("plot-png");
    // The plot with `extra` options before `--out {out}`.
    let plot = |extra: &str| {
        format!(
            "plot {{csv}} --x bits --y mse --series mechanism --panel clients \
             --where epsilon_target=1 --log-y --title {{title}} {extra} --out {{out}}"
        )
    };
    // The CSV, the title and the output path of one plot.
    fn vars<'a>(csv: &'a str, out: &'a Path) -> [(&'static str, &'a str); 3] {
        [("csv", csv), ("title", "PNG ε"), ("out", path(out))]
    }
    let c = path(&csv);
    let svg = dir.0.join("f.svg");
    let png = dir.0.join("f.png");
    let png1 = dir.0.join("f1.png");
    ok_line(&plot(""), &vars(c, &svg));
    ok_line(&plot(""), &vars(c, &png));
    ok_line(&plot("--png-scale 1"), &vars(c, &png1));
    let svg = std::fs::read_to_string(&svg).unwrap();
    let attr = |name: &str| -> u32 {
        let start = svg.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        svg[start..].split('"').next().unwrap().parse().unwrap()
    };
    let (w, h) = (attr("width"), attr("height"));
    assert_eq!(png_size(&std::fs::read(&png).unwrap()), (2 * w, 2 * h));
    assert_eq!(png_size(&std::fs::read(&png1).unwrap()), (w, h));
    // Not .svg or .png: an error before anything is written; a bad scale is an error too.
    let pdf = dir.0.join("f.pdf");
    fail_line(&plot(""), &vars(c, &pdf), "must end in .svg or .png");
    assert!(!pdf.exists());
    let bad = dir.0.join("bad.png");
    fail_line(&plot("--png-scale 0"), &vars(c, &bad), "PNG scale");
    assert!(!bad.exists());
}

#[test]
fn plot_reads_wide_tables_standard_errors_and_averages() {
    let dir = TempDir::new("plot-wide");
    let csv = dir.0.join("t.csv");
    std::fs::write(
        &csv,
        "bits,epsilon,ours,theirs,trial,mse,se\n\
         3,1,0.9,1.0,0,0.5,0.1\n3,3,0.07,0.08,1,0.7,0.1\n4,1,0.8,,0,0.4,0.2\n",
    )
    .unwrap();
    let svg = dir.0.join("t.svg");
    let vars = [("csv", path(&csv)), ("svg", path(&svg))];
    // Plots `template` and returns the SVG it wrote.
    let ok = |template: &str| {
        ok_line(template, &vars);
        std::fs::read_to_string(&svg).unwrap()
    };
    let text = ok("plot {csv} --x epsilon --y ours,theirs --panel bits --dash-by @y --out {svg}");
    assert_eq!(series_names(&text), ["ours", "theirs", "ours"]);
    let text = ok("plot {csv} --x bits --y mse --se se --se-times 2 --errors bars --out {svg}");
    assert_eq!(text.matches(r#"class="bar""#).count(), 3);
    let text = ok("plot {csv} --x bits --y mse --average --errors bars --out {svg}");
    // 3 bits has two rows (one interval), 4 bits one row (none).
    assert_eq!(text.matches(r#"class="bar""#).count(), 1);
    assert_eq!(text.matches(r#"class="marker""#).count(), 2);
    fail_line(
        "plot {csv} --x bits --y mse --se se --average --out {svg}",
        &vars,
        "cannot be used with",
    );
}
