"""`dvc plots show` offline: writes `.dvc/plots_page.html` (`python -m pipeline.plots_page`), the HTML template
`.dvc/config` names (`plots.html_template`), with Vega, Vega-Lite and Vega-Embed inline, so the page DVC writes
draws its charts on a machine with no network (DVC's own page loads them from a CDN: offline, a blank page), and
the revisions of an image plot share the window's width instead of scrolling sideways.

The libraries come from vl-convert-python (pinned in requirements-test.lock), which bundles them; the page is
committed so that any clone has it, and a test checks that it is what this module makes from the pinned bundle."""

from __future__ import annotations

import sys

import vl_convert

from pipeline.code_version import PROJECT_ROOT

PAGE = PROJECT_ROOT / ".dvc" / "plots_page.html"
VEGA_LITE_VERSION = "5.20"  # DVC's templates are Vega-Lite 5 specs
EXPOSE = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"
TEMPLATE = """<!DOCTYPE html>
<html>
<head>
    {refresh_tag}
    <meta charset="utf-8">
    <title>DVC plots</title>
    <!-- Vega, Vega-Lite {vega_lite_version} and Vega-Embed (BSD-3-Clause), bundled by vl-convert-python {vl_convert_version} -->
    <script>
{bundle}
    </script>
    <style>
        body { font-family: sans-serif; }
        table { border-spacing: 15px; }
        img { max-width: 100%; height: auto; }
        /* DVC's image plots: DVC sets each picture's revisions in one unbreakable line at full size (three 1224-px
           pictures scroll sideways); here they share the window's width, side by side, each scaled to its share */
        div[style*="white-space: nowrap"] { display: flex !important; flex-wrap: wrap; align-items: flex-start;
                                            white-space: normal !important; overflow-x: hidden; }
        div[style*="white-space: nowrap"] > p { flex-basis: 100%; }
        div[style*="white-space: nowrap"] > div { flex: 1 1 0; min-width: 0; }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""


def page() -> str:
    # DVC fills {plot_divs} and {refresh_tag} by plain replacement; the page leaves out {scripts}, the CDN tags
    bundle = vl_convert.javascript_bundle(EXPOSE, vl_version=VEGA_LITE_VERSION).replace("</script", "<\\/script")
    return (TEMPLATE.replace("{vega_lite_version}", VEGA_LITE_VERSION)
            .replace("{vl_convert_version}", vl_convert.__version__).replace("{bundle}", bundle))


def main() -> int:
    PAGE.write_text(page(), encoding="utf8")
    print(f"wrote {PAGE.relative_to(PROJECT_ROOT)} ({PAGE.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
