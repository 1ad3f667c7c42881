"""The engine: opening reports, the compiled plan of declared SQL objects and Python
builders, running it in the pool or on Dask, and the sessions that read the results.
It imports no domain package (crossrank/, report/, ...) and stands on nsyswrap.storage."""
