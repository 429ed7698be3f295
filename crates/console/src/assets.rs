//! The browser application, embedded in the binary (it works with no network): the page, its
//! script and style, and the vendored libraries — uPlot, Cytoscape.js, fCoSE with cose-base and layout-base — (`crates/console/assets/vendor`, rebuilt from
//! the pinned npm packages by `ui/build.sh`; each with its license beside it).

pub const INDEX: &str = include_str!("../assets/index.html");

/// An asset by name: its content type and bytes.
pub fn get(name: &str) -> Option<(&'static str, &'static [u8])> {
    Some(match name {
        "app.js" => ("text/javascript; charset=utf-8", include_bytes!("../assets/app.js")),
        "app.css" => ("text/css; charset=utf-8", include_bytes!("../assets/app.css")),
        "uplot.js" => ("text/javascript; charset=utf-8", include_bytes!("../assets/vendor/uplot.js")),
        "uplot.css" => ("text/css; charset=utf-8", include_bytes!("../assets/vendor/uplot.css")),
        "uplot.LICENSE" => ("text/plain; charset=utf-8", include_bytes!("../assets/vendor/uplot.LICENSE")),
        "topo.js" => ("text/javascript; charset=utf-8", include_bytes!("../assets/topo.js")),
        "cytoscape.js" => ("text/javascript; charset=utf-8", include_bytes!("../assets/vendor/cytoscape.js")),
        "cytoscape.LICENSE" => ("text/plain; charset=utf-8", include_bytes!("../assets/vendor/cytoscape.LICENSE")),
        "layout-base.js" => ("text/javascript; charset=utf-8", include_bytes!("../assets/vendor/layout-base.js")),
        "layout-base.LICENSE" => ("text/plain; charset=utf-8", include_bytes!("../assets/vendor/layout-base.LICENSE")),
        "cose-base.js" => ("text/javascript; charset=utf-8", include_bytes!("../assets/vendor/cose-base.js")),
        "cose-base.LICENSE" => ("text/plain; charset=utf-8", include_bytes!("../assets/vendor/cose-base.LICENSE")),
        "cytoscape-fcose.js" => ("text/javascript; charset=utf-8", include_bytes!("../assets/vendor/cytoscape-fcose.js")),
        "cytoscape-fcose.LICENSE" => ("text/plain; charset=utf-8", include_bytes!("../assets/vendor/cytoscape-fcose.LICENSE")),
        _ => return None,
    })
}
