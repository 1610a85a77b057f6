package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "screen changed" event from the floor's controllers. */
public final class ScreenChangedHandler implements Handler {
    private final EventLog log;

    public ScreenChangedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/screenChanged";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
