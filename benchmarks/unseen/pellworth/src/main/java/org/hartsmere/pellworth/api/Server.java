package org.hartsmere.pellworth.api;

import org.hartsmere.pellworth.Settings;

/** The web pages the office and the drivers open. */
public final class Server {
    private Server() {}

    public static void start(Settings settings) {
        System.out.println("pellworth: serving with " + settings.file());
    }
}
