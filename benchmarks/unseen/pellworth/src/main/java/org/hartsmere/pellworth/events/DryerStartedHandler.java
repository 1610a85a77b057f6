package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "dryer started" event from the floor's controllers. */
public final class DryerStartedHandler implements Handler {
    private final EventLog log;

    public DryerStartedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/dryerStarted";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
