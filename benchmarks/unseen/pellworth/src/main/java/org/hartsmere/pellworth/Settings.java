package org.hartsmere.pellworth;

import java.nio.file.Path;

/** The settings file, read once at start. */
public record Settings(Path file) {
    public static Settings load(String name) {
        return new Settings(Path.of(name));
    }
}
