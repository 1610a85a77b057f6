package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "trailer arrived" event from the floor's controllers. */
public final class TrailerArrivedHandler implements Handler {
    private final EventLog log;

    public TrailerArrivedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/trailerArrived";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
