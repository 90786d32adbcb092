"""Stage 0 (the demo alone): synthetic Sentinel-2 L2A scenes and a synthetic CORINE raster for the offline demo.

The scenes are written the way Earth Search v1 serves the real product (COG assets, STAC items), so
the pipeline runs on them unchanged; the true class maps go beside them for scoring only.
"""
