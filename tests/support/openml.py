"""A tiny OpenML for sklearn.datasets.fetch_openml, served by LocalWeb: the JSON API
answers (search by name, description, features, qualities) and one ARFF file, as
openml.org serves them (gzip when asked). `OPENML_PATCH` points sklearn at it."""

from __future__ import annotations

import hashlib
import json

from support.http_servers import LocalWeb

DATA_ID = 61
ARFF = b"""% a tiny dataset in OpenML's shape
@RELATION tiny

@ATTRIBUTE 'width' NUMERIC
@ATTRIBUTE 'height' NUMERIC
@ATTRIBUTE 'class' {small,large}

@DATA
1.5,2.0,small
3.0,4.5,large
0.5,1.0,small
"""


def _feature(index: int, name: str, kind: str, **extra: object) -> dict[str, object]:
    return {"index": str(index), "name": name, "data_type": kind, "is_target": "true" if name == "class" else "false",
            "is_ignore": "false", "is_row_identifier": "false", "number_of_missing_values": "0", **extra}


def serve_openml(web: LocalWeb) -> str:
    """Serve the tiny dataset "tiny" (version 1); the guest code that points sklearn at it."""
    base = "/openml/api/v1/json/data"
    arff_url = web.serve("/openml/data/v1/download/1/tiny.arff", ARFF, "text/plain")
    web.serve(f"{base}/list/data_name/tiny/limit/2/data_version/1", json.dumps(
        {"data": {"dataset": [{"did": DATA_ID, "name": "tiny", "version": 1, "status": "active",
                               "format": "ARFF"}]}}).encode())
    web.serve(f"{base}/{DATA_ID}", json.dumps({"data_set_description": {
        "id": str(DATA_ID), "name": "tiny", "version": "1", "format": "ARFF", "file_id": "1", "status": "active",
        "default_target_attribute": "class", "description": "A tiny dataset for the tests.",
        "md5_checksum": hashlib.md5(ARFF).hexdigest(), "url": arff_url,
    }}).encode())
    web.serve(f"{base}/features/{DATA_ID}", json.dumps({"data_features": {"feature": [
        _feature(0, "width", "numeric"), _feature(1, "height", "numeric"),
        _feature(2, "class", "nominal", nominal_value=["small", "large"]),
    ]}}).encode())
    web.serve(f"{base}/qualities/{DATA_ID}", json.dumps({"data_qualities": {"quality": [
        {"name": "NumberOfInstances", "value": "3.0"}, {"name": "NumberOfFeatures", "value": "3.0"},
    ]}}).encode())
    root = web.url("/openml/api/v1/json/data")
    return ("import sklearn.datasets._openml as _openml\n"
            f"_openml._SEARCH_NAME = {root + '/list/data_name/{}/limit/2'!r}\n"
            f"_openml._DATA_INFO = {root + '/{}'!r}\n"
            f"_openml._DATA_FEATURES = {root + '/features/{}'!r}\n"
            f"_openml._DATA_QUALITIES = {root + '/qualities/{}'!r}\n")
