package org.hartsmere.pellworth;

import org.hartsmere.pellworth.api.Server;

/** `java -jar pellworth.jar serve` starts the scheduler and its web pages. */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || !args[0].equals("serve")) {
            System.err.println("usage: pellworth serve");
            System.exit(2);
        }
        Server.start(Settings.load("pellworth.yaml"));
    }
}
