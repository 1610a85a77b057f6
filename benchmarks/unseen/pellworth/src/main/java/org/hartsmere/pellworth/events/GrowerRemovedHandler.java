package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "grower removed" event from the floor's controllers. */
public final class GrowerRemovedHandler implements Handler {
    private final EventLog log;

    public GrowerRemovedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/growerRemoved";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
