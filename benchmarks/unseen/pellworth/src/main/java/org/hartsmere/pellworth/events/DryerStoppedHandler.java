package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "dryer stopped" event from the floor's controllers. */
public final class DryerStoppedHandler implements Handler {
    private final EventLog log;

    public DryerStoppedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/dryerStopped";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
