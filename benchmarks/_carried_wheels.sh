# Sourced by the scripts that run on a lent GPU node: the wheels of packages the node lacks, carried in
# .whl/ (rasterio, say), installed into /tmp/site and put on PYTHONPATH. Nothing to do without .whl/.
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site
fi
