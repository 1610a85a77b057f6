package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "dryer fault" event from the floor's controllers. */
public final class DryerFaultHandler implements Handler {
    private final EventLog log;

    public DryerFaultHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/dryerFault";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
