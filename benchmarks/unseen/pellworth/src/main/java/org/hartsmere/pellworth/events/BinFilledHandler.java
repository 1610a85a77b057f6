package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "bin filled" event from the floor's controllers. */
public final class BinFilledHandler implements Handler {
    private final EventLog log;

    public BinFilledHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/binFilled";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
