package org.fernhollow;

/** The {@code fernhollow} command: {@code serve}, {@code open-week} or {@code release-stale}. */
public final class Main {

    private Main() {}

    public static void main(String[] args) {
        String command = args.length > 0 ? args[0] : "serve";
        switch (command) {
            case "serve" -> Server.start(Settings.load("fernhollow.ini"));
            case "open-week" -> Calendar.openNextWeek(Settings.load("fernhollow.ini"));
            case "release-stale" -> Server.releaseStale(Settings.load("fernhollow.ini"));
            default -> {
                System.err.println("fernhollow: unknown command " + command);
                System.exit(2);
            }
        }
    }
}
