"""The scale-out layer (seed 004), the top one: sessions mapped to a pool of sandbox
hosts through Redis. Imports from lower layers only through their public APIs.

- errors.py         the session manager's domain errors and their HTTP answers
- session_store.py  seed 004's Redis primitives, the key layout, the hosts' heartbeats
- session_manager.py  sessionMgr: get_sandbox_by_session, its errors and metrics
- sandbox_host.py   `wasm-kernel host`: a Jupyter Server of wasm-python kernels, heartbeating into Redis
- sandbox_manager.py  `wasm-kernel sandbox-manager`: seed 004's sandboxMgr over HTTP, and the lost-host reaper
- router.py         `wasm-kernel router`: the Jupyter gateway API in front of the pool

Their command lines are in cli/cluster_commands.py.
"""
