package org.hartsmere.pellworth.store;

/** Appends every controller message to the floor's log file. */
public interface EventLog {
    void append(String topic, String payload);
}
