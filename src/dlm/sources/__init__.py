"""`training.sources`: walk source trees into `FileRow`s and read them into row text."""
