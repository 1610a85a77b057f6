package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "burner fault" event from the floor's controllers. */
public final class BurnerFaultHandler implements Handler {
    private final EventLog log;

    public BurnerFaultHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/burnerFault";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
