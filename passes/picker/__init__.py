"""The picker engine (compile time only): `ranker` (candidates and their costs), `plan`
(placement DP and the plan cache), `residency` (the eviction/reload planner) and `support`
(what the picker passes share)."""
