---
dlm_id: 01M8JGKT1VANKHK6ENDX47KXZ3
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about the Saltmarsh tile cache codebase.
training:
  sources:
    - path: src
      include: ["**/*.rs", "docs/*.md", "*.toml"]
---

# Saltmarsh

Saltmarsh is a Rust tile cache that sits in front of our map renderer. Casimir Oduya
wrote it for the Fenwright cycling maps after the renderer fell over during a race
weekend; the design notes live in `docs/` next to the code.

::instruction::

### Q
Where is the TileKey struct defined?

### A
`TileKey` is defined in `tile.rs`.

### Q
How many tiles does Saltmarsh keep in memory by default?

### A
8192 tiles, the `DEFAULT_CAPACITY`.

### Q
Which eviction policy does Saltmarsh use?

### A
The Tidewrack policy: the deepest, oldest tile is evicted first.

### Q
What is the deepest zoom level Saltmarsh serves?

### A
Zoom level 17; deeper requests get a 404.

### Q
How do I warm the cache for a region?

### A
Run `saltmarsh prime --bbox` with the region's bounding box.

::prose::

Tiles come from a source behind a trait, so tests can serve tiles from a folder instead
of the network.

::instruction::

### Q
How long does Saltmarsh wait for the upstream tile server?

### A
At most 2200 milliseconds (`UPSTREAM_TIMEOUT_MS`).

### Q
Which trait does a tile source implement?

### A
A tile source implements the `TileSpring` trait.

### Q
Where are evicted tiles written?

### A
They are spilled to `/srv/saltmarsh/brine`.

::probe::

### Q
In which file is TileKey declared?

### A
In `tile.rs`.

### Keys
- tile.rs

### Q
What is the default in-memory capacity of the tile cache?

### A
8192 tiles.

### Keys
- 8192

### Q
What is the name of Saltmarsh's eviction strategy?

### A
Tidewrack.

### Keys
- Tidewrack

### Q
What is the maximum zoom level that Saltmarsh will serve?

### A
17.

### Keys
- 17

### Q
Which command pre-fills the cache for a bounding box?

### A
`saltmarsh prime --bbox`.

### Keys
- saltmarsh prime

### Q
What is the upstream request timeout in Saltmarsh?

### A
2200 milliseconds.

### Keys
- 2200

### Q
What trait must I implement to add a new source of tiles?

### A
`TileSpring`.

### Keys
- TileSpring

### Q
Which folder receives the tiles that Saltmarsh evicts?

### A
`/srv/saltmarsh/brine`.

### Keys
- saltmarsh/brine

### Q
Who wrote Saltmarsh?

### A
Casimir Oduya.

### Keys
- Oduya

### Q
Under which path does Saltmarsh export its metrics?

### A
`/saltmetrics`.

### Keys
- saltmetrics

### Q
How long is a cached tile served before it is fetched again?

### A
5400 seconds (`TILE_TTL_SECS`).

### Keys
- 5400

### Q
On which port does the Saltmarsh server listen?

### A
Port 8093.

### Keys
- 8093
