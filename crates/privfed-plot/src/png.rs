//! PNG output: the figure's SVG (exactly what [`render_svg`] writes) rasterized with resvg, with
//! its text set in a font compiled into the binary, so a PNG and its SVG show the same picture
//! and no system font library (fontconfig, freetype) or font file is needed.

use super::{Figure, PlotError, Result, render_svg};
use resvg::{tiny_skia, usvg};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The family the SVG names first and the rasterizer sets all text in: Ubuntu (the Light face
/// that `epaint_default_fonts` ships; Ubuntu Font Licence 1.0).
pub(crate) const FONT_FAMILY: &str = "Ubuntu";

/// Pixels per SVG unit that [`write_figure`](super::write_figure) uses for PNG (2: sharp on high-density screens).
pub const DEFAULT_PNG_SCALE: f64 = 2.0;

/// The largest PNG side in pixels.
const MAX_SIDE: u32 = 16_384;

/// The fonts the rasterizer knows: Ubuntu Light for all text, and Hack (monospace, wider
/// Unicode coverage) as the fallback for characters Ubuntu lacks. Loaded once from the bytes
/// compiled into the binary; the system's fonts are never read.
fn font_database() -> Arc<usvg::fontdb::Database> {
    static DB: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = usvg::fontdb::Database::new();
        for bytes in [
            epaint_default_fonts::UBUNTU_LIGHT,
            epaint_default_fonts::HACK_REGULAR,
        ] {
            db.load_font_source(usvg::fontdb::Source::Binary(Arc::new(bytes)));
        }
        db.set_sans_serif_family(FONT_FAMILY);
        db.set_serif_family(FONT_FAMILY);
        db.set_monospace_family("Hack");
        Arc::new(db)
    })
    .clone()
}

/// Renders `figure` as a PNG image: its SVG ([`render_svg`]) rasterized at `scale` pixels per
/// SVG unit (1: one pixel per unit; the image is `scale` × the SVG's width and height, rounded
/// up), on a white background, text in Ubuntu Light.
///
/// Errors: those of [`render_svg`]; [`PlotError::Options`] for a scale that is not finite and
/// in (0, 16]; [`PlotError::Raster`] for an image above 16,384 pixels a side.
pub fn render_png(figure: &Figure, scale: f64) -> Result<Vec<u8>> {
    if !(scale.is_finite() && scale > 0.0 && scale <= 16.0) {
        return Err(PlotError::Options(format!(
            "the PNG scale must be finite and in (0, 16] pixels per SVG unit (got {scale})"
        )));
    }
    let svg = render_svg(figure)?;
    let options = usvg::Options {
        font_family: FONT_FAMILY.into(),
        fontdb: font_database(),
        ..usvg::Options::default()
    };
    let tree =
        usvg::Tree::from_str(&svg, &options).map_err(|e| PlotError::Render(e.to_string()))?;
    let side = |v: f32| (f64::from(v) * scale).ceil();
    let (w, h) = (side(tree.size().width()), side(tree.size().height()));
    if !(w >= 1.0 && h >= 1.0 && w <= f64::from(MAX_SIDE) && h <= f64::from(MAX_SIDE)) {
        return Err(PlotError::Raster {
            width: w,
            height: h,
        });
    }
    // Both sides are whole numbers in [1, 16384], so the casts are exact.
    let mut pixmap = tiny_skia::Pixmap::new(w as u32, h as u32).ok_or(PlotError::Raster {
        width: w,
        height: h,
    })?;
    let s = scale as f32;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(s, s),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| PlotError::Render(e.to_string()))
}

/// Renders `figure` as PNG at `scale` ([`render_png`]) and writes it to `path`.
pub fn write_png(figure: &Figure, path: &Path, scale: f64) -> Result<()> {
    let png = render_png(figure, scale)?;
    std::fs::write(path, png).map_err(|source| PlotError::Io {
        action: "writing",
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_svg_font_family_is_a_family_of_the_compiled_in_fonts() {
        let db = font_database();
        let families: Vec<String> = db
            .faces()
            .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
            .collect();
        assert!(families.iter().any(|f| f == FONT_FAMILY), "{families:?}");
        assert!(families.iter().any(|f| f == "Hack"), "{families:?}");
        assert_eq!(db.len(), 2);
    }
}
