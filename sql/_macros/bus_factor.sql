-- NCCL's bus bandwidth factor of op over n ranks (nccl-tests' busBw = algBw x factor):
-- all_reduce 2(n-1)/n; all_gather, reduce_scatter and all_to_all (n-1)/n; others 1. A
-- library of its own: it reads no view, so a run of sample files (no views) takes it too.
CREATE OR REPLACE MACRO bus_factor(op, n) AS CASE
    WHEN op LIKE 'all_reduce%' THEN 2.0 * (n - 1) / n
    WHEN op LIKE 'all_gather%' OR op LIKE 'reduce_scatter%' OR op LIKE 'all_to_all%'
        THEN (n - 1) / n
    ELSE 1.0
END;
