package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "trailer left" event from the floor's controllers. */
public final class TrailerLeftHandler implements Handler {
    private final EventLog log;

    public TrailerLeftHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/trailerLeft";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
