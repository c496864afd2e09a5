"""The scale-out layer (seed 004), the top one: sessions mapped to a pool of sandbox
hosts through Redis. Imports from lower layers only through their public APIs.

- errors.py         the session manager's domain errors and their HTTP answers
- records.py        the records in Redis, read as untrusted input: schema and signature
- session_store.py  seed 004's Redis primitives, the key layout, the hosts' heartbeats,
                    the router's kernels: the one module that speaks to Redis
- session_manager.py  sessionMgr: get_sandbox_by_session, its errors and metrics
- sandbox_host.py   `wasm-kernel host`: a Jupyter Server of wasm-python kernels, heartbeating into Redis
- sandbox_manager.py  seed 004's sandboxMgr over HTTP; pool_reaper.py its sweeps
- manager_service.py  `wasm-kernel sandbox-manager`: SandboxManagerApp, its configuration and process
- router.py         the Jupyter gateway API in front of the pool; router_identity.py who calls
- router_app.py     `wasm-kernel router`: RouterApp, its configuration and process
- service_app.py    the traits both apps share: config file, flags, env defaults, fail closed
- credentials.py    what a secret must be, and the one line a refusal prints

Their command lines are in cli/cluster_commands.py.
"""
