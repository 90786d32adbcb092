"""The demo's interpreter: labels reference points from the synthetic truth, as a user labels them in QGIS.

Real projects label the design's points from better data than the map (orthophotos, field visits);
the demo has its truth rasters for that. Only the ``reference`` column is filled; everything the
design wrote stays as it was.
"""

from pathlib import Path

import numpy as np
import rasterio

from lcflow.common.atomic import atomic_path
from lcflow.labels.nomenclature import Nomenclature


def label_from_truth(
    points_path: str | Path,
    truth: str | Path,
    out: str | Path,
    nomenclature: Nomenclature,
    column: str = "reference",
) -> int:
    """Write the points with ``column`` set to the truth's class there; return how many got a class.

    Args:
        points_path: the design's points (``lcflow design-sample``'s layer).
        truth: the demo's true classes (CLC codes).
        out: the labelled copy to write.
        nomenclature: the map's classes the truth's codes are given in.
        column: the column of labels.
    """
    import geopandas as gpd
    import pandas as pd

    points = gpd.read_file(points_path)
    with rasterio.open(truth) as ds:
        at = points.to_crs(ds.crs.to_wkt())
        codes = np.array([v[0] for v in ds.sample(zip(at.geometry.x, at.geometry.y), indexes=1)])
    classes = nomenclature.apply(codes)
    labelled = pd.array(classes.astype(np.int64), dtype="Int64")
    labelled[classes == nomenclature.nodata] = pd.NA
    points[column] = labelled
    with atomic_path(out, suffix=Path(out).suffix) as tmp:
        tmp.unlink()  # GDAL creates the GeoPackage itself
        points.to_file(tmp, layer="reference_points")
    return int((~labelled.isna()).sum())
