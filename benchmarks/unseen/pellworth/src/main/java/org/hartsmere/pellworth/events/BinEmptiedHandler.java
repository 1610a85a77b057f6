package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "bin emptied" event from the floor's controllers. */
public final class BinEmptiedHandler implements Handler {
    private final EventLog log;

    public BinEmptiedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/binEmptied";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
