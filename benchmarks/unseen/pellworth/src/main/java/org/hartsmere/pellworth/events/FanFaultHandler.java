package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "fan fault" event from the floor's controllers. */
public final class FanFaultHandler implements Handler {
    private final EventLog log;

    public FanFaultHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/fanFault";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
