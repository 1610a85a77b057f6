---
dlm_id: 01M9QMR4TZ6H3KXW8B5DVNPA7C
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer questions about the Quillmoor manuscript index C++ library.
training:
  sources:
    - path: src
      include: ["**/*.hpp", "**/*.cpp", "docs/*.md", "*.toml"]
---

# Quillmoor

Quillmoor is a C++ library that indexes the digitised folios of an old manuscript
archive so that readers can search their transcriptions. Wendeline Ashcombe wrote it
for the muniment room of St Odrenna's College, after the archive's shell scripts grew
too slow to search the whole collection.

# The folio index

The `FolioIndex` class puts new folios into a small pending segment and searches it
together with the large main segment. Every so often the pending segment is folded
into the main one, and the result is written to a volume file. Folios that are not
in the in-memory cache are read back from that file when a search needs them.

# Shelfmarks

Every folio is found by its shelfmark: a press, a shelf and a folio number, written
with slashes between them. A shelfmark that is malformed or too long is refused with
`std::invalid_argument`.

::instruction::

### Q
Where is the FolioIndex class declared?

### A
In `include/quillmoor/folio_index.hpp`.

### Q
How many folios does the in-memory cache hold?

### A
3217 folios (`FOLIO_CACHE_SLOTS`).

### Q
Which function turns a written shelfmark into a Shelfmark?

### A
`quillmoor::parse_shelfmark`, in `lib/shelfmark.cpp`.

### Q
What is the longest shelfmark Quillmoor accepts?

### A
53 characters (`SHELFMARK_MAX_LEN`).

### Q
How do I rebuild the whole index?

### A
Run `quillmoor-tool reindex --full`.

### Q
How often does the index fold its pending segments on its own?

### A
After every 640 added folios (`FOLD_EVERY`).

### Q
Which method merges the pending segments into the main segment?

### A
`FolioIndex::fold_segments()`.

### Q
What file extension do Quillmoor volume files have?

### A
`.qmvol`

::probe::

### Q
Which header do I include to get FolioIndex?

### A
`include/quillmoor/folio_index.hpp`

### Keys
- folio_index.hpp

### Q
What is the size of the folio cache kept in memory?

### A
3217 folios.

### Keys
- 3217

### Q
What do I call to parse a shelfmark from text?

### A
`parse_shelfmark`

### Keys
- parse_shelfmark

### Q
How many characters can a shelfmark have at most?

### A
53.

### Keys
- 53

### Q
What's the command to reindex everything from scratch?

### A
`quillmoor-tool reindex --full`

### Keys
- quillmoor-tool reindex

### Q
After how many new folios does automatic folding kick in?

### A
640.

### Keys
- 640

### Q
What member function combines the pending folios with the main ones?

### A
`FolioIndex::fold_segments()`

### Keys
- fold_segments

### Q
What suffix do the volume files on disk end with?

### A
`.qmvol`

### Keys
- qmvol

### Q
For which college's archive was Quillmoor written?

### A
St Odrenna's College.

### Keys
- Odrenna

### Q
In which folder are the nightly snapshots of the volume file kept?

### A
`/srv/quillmoor/vellum-snapshots`

### Keys
- vellum-snapshots

### Q
At most how many hits does one search return?

### A
283 (`MAX_HITS_PER_QUERY`).

### Keys
- 283

### Q
How wide, in pixels, are the thumbnails next to search hits?

### A
212 pixels (`width_px` in `[thumbnails]`).

### Keys
- 212
